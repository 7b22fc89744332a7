/*-------------------------------------------------------------------------
 *
 * streamsketch.h
 *	  The storage layer's API that every structure uses: its settings, the
 *	  table access method helpers, the structure's descriptor
 *	  (ss_structure.h), its state and its parameters' labels.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMSKETCH_H
#define STREAMSKETCH_H

#include "postgres.h"

#include "access/tableam.h"
#include "lib/stringinfo.h"
#include "utils/rel.h"

/* ss_settings.c: the storage layer's settings (streamsketch.*) */
extern int	ss_pending_memory_kb;
extern int	ss_change_log_limit_kb;
extern int	ss_max_structure_size_mb;
extern bool ss_maintenance_consolidation;
extern Size ss_consolidation_memory(void);

/* ss_tableam.c: fill the callbacks every structure shares */
struct SSStructure;
struct SSConsolidation;
extern void ss_tableam_init_common(TableAmRoutine *routine,
								   const struct SSStructure *ops);
extern const TableAmRoutine *ss_tableam_routine(const struct SSStructure *s);
extern bool ss_relation_is_new(Relation rel);
extern bool ss_relam_is_streamsketch(Oid amoid);
extern bool ss_scan_claim(TableScanDesc scan);

/*
 * A scan of a structure that has rows: the structure's scan descriptor
 * starts with this (see SSScanOps).
 */
typedef struct SSScanDesc
{
	TableScanDescData base;
	const struct SSScanOps *ops;
	MemoryContext cxt;			/* the callbacks run in it */
	bool		started;
	bool		claimed;		/* this participant returns the rows */
	bool		done;
} SSScanDesc;
extern void ss_scan_desc_init(TableScanDesc scan, Relation rel,
							  Snapshot snapshot, int nkeys,
							  struct ScanKeyData *key,
							  ParallelTableScanDesc pscan, uint32 flags);
extern void ss_scan_desc_free(TableScanDesc scan);

extern void ss_set_new_filenode(Relation rel, const struct SSStructure *ops,
								const RelFileNode *newrnode, char persistence,
								TransactionId *freezeXid, MultiXactId *minmulti);
extern void ss_truncate_in_place(Relation rel, const struct SSStructure *ops);

#include "ss_structure.h"

/* ss_structure.c: which structure a relation is */
extern const SSStructure *ss_structure_ops(Relation rel);
extern const char *ss_structure_name(Relation rel);
extern void ss_tableam_register(const TableAmRoutine *routine,
								const SSStructure *ops);

/* ss_page.c: the metapage's contents, validated */
extern bool ss_read_structure_meta(Relation rel, const SSStructure *ops,
								   void *meta);

/*
 * ss_params.c: the state (parameters and column info) cached in
 * rd_amcache, the label, constructors
 */
#define SS_LABEL_PROVIDER "streamsketch"

extern void *ss_get_state(Relation rel, const SSStructure *ops);
extern void ss_forget_state(Relation rel);
extern void ss_params_init(void);
extern void ss_set_label(Oid relid, const char *label);
extern char *ss_get_label(Oid relid);
extern void ss_describe(Relation rel, const SSStructure *ops, const void *st);
/* ss_structure.c: label text */
extern void ss_label_split(const char *label, int nkeys,
						   const char *const *keys, char **values);
extern double ss_label_float(const char *key, const char *value);
extern int64 ss_label_int(const char *key, const char *value, int64 min,
						  int64 max);
extern bool ss_label_bool(const char *key, const char *value);
extern void ss_label_append_float(StringInfo buf, const char *key, double v);
extern Oid	ss_create_structure(const SSStructure *ops, const void *st,
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
extern Oid	ss_create_structure_columns(const SSStructure *ops, const void *st,
										text *name, const char *columns,
										const char *amname, bool unlogged);
extern const void *ss_creation_params(Relation rel, const SSStructure *ops);
extern bool ss_relabel_in_progress(Oid relid);
extern void ss_cluster_init_fork(Relation OldTable, Relation NewTable);

/* ss_settings.c: settings whose value was rejected when the library loaded */
extern void ss_check_setting(const char *name);
extern void ss_check_settings(const char *const *names);
extern void ss_params_note_placeholders(const char *prefix);
extern void ss_params_find_rejected(void);
extern void ss_setting_assigned(const char *name);
extern void ss_storage_init(void);

/*
 * An assign hook for a setting that gives new structures a parameter: an
 * assignment after the library was loaded (SET, RESET) replaces a value
 * that was rejected when it loaded (ss_settings.c).
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
extern int64 ss_int_datum(Oid typid, Datum d);

/* ss_guard.c: refuse operations that would silently lose data */
extern void ss_guard_init(void);
extern Oid	ss_get_rel_relam(Oid relid);

/* ss_evtrigger.c: an event trigger support function's rows, one by one */
typedef struct SSEventRows
{
	struct Tuplestorestate *rows;
	struct TupleTableSlot *slot;	/* the current row */
} SSEventRows;

extern void ss_event_rows_begin(SSEventRows *r, Oid fnoid);
extern bool ss_event_rows_next(SSEventRows *r);
extern Oid	ss_event_rows_oid(SSEventRows *r, AttrNumber attno);
extern void ss_event_rows_end(SSEventRows *r);
struct EventTriggerData;
extern struct EventTriggerData *ss_event_trigger_data(FunctionCallInfo fcinfo);

/* The key of element i of an array arr (ss_lower_bound) */
typedef uint64 (*SSKeyAtFn) (const void *arr, uint32 i);

/*
 * Binary search of the elements [lo, hi) of arr, whose keys ascend: the
 * first whose key is not below key, or hi.  Inline, so that a caller's
 * key_at is inlined too.
 */
static inline uint32
ss_lower_bound(const void *arr, uint32 lo, uint32 hi, uint64 key,
			   SSKeyAtFn key_at)
{
	while (lo < hi)
	{
		uint32		mid = lo + (hi - lo) / 2;

		if (key_at(arr, mid) < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* SSKeyAtFn of a uint64 array */
static inline uint64
ss_uint64_at(const void *arr, uint32 i)
{
	return ((const uint64 *) arr)[i];
}

/* Extend rel (under the extension lock) so that blkno exists. */
extern void ss_extend_to(Relation rel, BlockNumber blkno);

#endif							/* STREAMSKETCH_H */
