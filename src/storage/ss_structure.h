/*-------------------------------------------------------------------------
 *
 * ss_structure.h
 *	  A structure's descriptor: everything the storage layer needs to know
 *	  of one kind of structure (bcms, the quotient filter family, ...),
 *	  declared once in the structure's folder and listed in
 *	  src/streamsketch.c.  From its parameter table the storage layer
 *	  derives the settings that give new structures their parameters, the
 *	  label that pg_dump keeps, the constructors' argument checks and the
 *	  table comment (ss_structure.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_STRUCTURE_H
#define SS_STRUCTURE_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"
#include "utils/relcache.h"

struct SSConsolidation;
struct SSLogSource;
struct SSPendingHeader;

/*
 * How a parameter is stored in the structure's state, written in a label
 * and given by a setting:
 *	INT:	an integer field of size bytes (signed or not); setting: integer
 *			(with its unit, e.g. GUC_UNIT_KB: a constructor's text argument
 *			may then name a unit, as SET does)
 *	REAL:	a double; setting: real
 *	BOOL:	a bool, "on"/"off" in a label; setting: boolean
 *	ENUM:	a uint32 holding one of options' values, written by its name;
 *			setting: enum
 *	TEXT:	converted by the structure's own to_text/from_text (a size with
 *			units, a column name, a definition); setting: string
 */
typedef enum SSParamType
{
	SS_PARAM_INT,
	SS_PARAM_REAL,
	SS_PARAM_BOOL,
	SS_PARAM_ENUM,
	SS_PARAM_TEXT
} SSParamType;

/* A parameter that a SET can not give: only constructors and labels do. */
#define SS_NO_SETTING NULL

/* .offset and .size of an INT parameter's field in state type T */
#define SS_FIELD(T, field) \
	.offset = offsetof(T, field), .size = sizeof(((T *) 0)->field)

typedef struct SSParam
{
	const char *name;			/* label key */
	/* the argument of ss_params_from_call's constructor that gives it */
	const char *argument;
	SSParamType type;
	uint16		offset;			/* of the field in the structure's state */
	uint8		size;			/* INT: of the field, 1, 2, 4 or 8 bytes */
	bool		is_signed;		/* INT */
	/* INT, REAL: the range labels and constructors accept (inclusive) */
	double		min;
	double		max;
	const struct config_enum_entry *options;	/* ENUM */
	/* TEXT: st's value as text (palloc'd); set st's value or raise 22023 */
	char	   *(*to_text) (const void *st);
	void		(*from_text) (const char *text, void *st);
	bool		internal;		/* left out of the table's comment (\dt+) */
	/*
	 * Computed by check_params from other parameters when they come from
	 * the settings (a sketch's width from its epsilon); its range is
	 * checked after check_params then.
	 */
	bool		derived;

	/*
	 * The setting (streamsketch.<setting>) whose value new structures get,
	 * or SS_NO_SETTING: then they get boot (INT, REAL, BOOL, ENUM), or
	 * nothing (TEXT: the structure's check_params fills it in).
	 */
	const char *setting;
	const char *short_desc;
	const char *long_desc;
	int			setting_flags;	/* GUC_UNIT_KB, ... */
	/*
	 * INT, REAL: the setting's range; an INT parameter's setting without
	 * one (both 0) has the parameter's range.
	 */
	double		setting_min;
	double		setting_max;
	double		boot;			/* the default */
	const char *boot_text;		/* TEXT: the default */
	GucStringCheckHook check_text;	/* TEXT: the setting's check hook */
} SSParam;

/*
 * The rows a scan returns (SELECT * FROM the table), for a structure that
 * has rows; without them a scan returns none.  The scan descriptor has
 * scan_size bytes and starts with an SSScanDesc; the callbacks run in its
 * memory context, reading through the bulk-read ring (ss_tableam.c).
 * start (optional) runs before the first row, in the participant that
 * returns a parallel scan's rows; next stores the next row in slot, or
 * returns false at the end; stop (optional) releases what the scan holds
 * outside its memory context (temporary files, sorts, slots, buffer pins)
 * at rescan and end, after which the rest of the descriptor is zeroed.
 */
struct SSScanDesc;
struct TupleTableSlot;
struct BulkInsertStateData;
typedef struct SSScanOps
{
	Size		scan_size;
	void		(*start) (struct SSScanDesc *scan);
	bool		(*next) (struct SSScanDesc *scan, struct TupleTableSlot *slot);
	void		(*stop) (struct SSScanDesc *scan);
} SSScanOps;

/*
 * Plain SQL reads other than the scan (ss_planner.c), for a structure that
 * can answer some quals without reading every row (a cbt's group keys):
 * add_paths adds CustomPaths of methods' scan (registered at load) to a
 * base relation of the structure, relation opened, when
 * streamsketch.enable_lookup_scan is on; the planner keeps the cheapest,
 * the scan included.  scan_row_cost (optional) is the CPU a scan spends
 * per row beyond a heap's (a cbt finalizes each group's aggregates),
 * added to the scan's cost so that the planner weighs it honestly.
 */
struct PlannerInfo;
struct RelOptInfo;
struct RangeTblEntry;
struct CustomScanMethods;
typedef struct SSPathOps
{
	void		(*add_paths) (struct PlannerInfo *root, struct RelOptInfo *rel,
							  struct RangeTblEntry *rte, Relation relation);
	double		(*scan_row_cost) (Relation relation);
	const struct CustomScanMethods *methods;
} SSPathOps;

/* Where check_params' parameters came from. */
typedef enum SSParamSource
{
	SS_PARAMS_SETTINGS,			/* the settings, for a new table */
	SS_PARAMS_LABEL,			/* a label (a restore, or the check against it) */
	SS_PARAMS_CONSTRUCTOR		/* the settings, then the constructor's arguments */
} SSParamSource;

/*
 * The descriptor.  The state struct is the structure's own, of state_size
 * bytes, cached in rd_amcache: its parameters (in the parameter table) and
 * column info.  The metapage's contents are meta_size bytes starting with
 * an SSMetaHeader.  The parameters are one struct of params_size bytes,
 * at state_params in the state and at meta_params in the metapage
 * contents: the storage layer copies it between the two (ss_meta_init,
 * ss_params_from_meta).  SS_LAYOUT sets these five fields.
 */
typedef struct SSStructure
{
	const char *name;			/* in messages: "bcms", "quotient filter" */
	const char *amname;			/* its (first) access method */
	const char *constructor;	/* its constructor: "bcms_create()" */
	uint32		kind;			/* the kind its metapage is stamped with */
	const uint16 *page_types;	/* the page types its pages may have */
	int			npage_types;
	const SSParam *params;		/* in label order */
	int			nparams;
	/* Called by _PG_init after the parameter settings are defined. */
	void		(*init) (void);

	/*
	 * Cross-checks the ranges cannot express, and the parameters derived
	 * from others (a sketch's geometry); raise 22023 for a bad value.  Run
	 * after the parameter table's range checks, whatever the source.
	 */
	void		(*check_params) (Relation rel, void *st, SSParamSource source);
	Size		state_size;
	Size		meta_size;
	uint16		state_params;
	uint16		meta_params;
	uint16		params_size;
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
	/*
	 * May a transaction's key records (SS_PENDING_KEY) of one hash be
	 * appended as one, weights added, where no other record comes between
	 * them (ss_pending.c)?  True for a structure whose consolidation and
	 * readers use key records only through each hash's total weight and
	 * rows (SSPendingHeader.rows) in such a run.
	 */
	bool		combine_keys;
	/*
	 * Optional, for a structure whose own records combine (a cbt's input
	 * rows into partial aggregates): at pre-commit, read the transaction's
	 * live records of rel from src and pass emit the records to append
	 * instead, in an order the structure's consolidation and readers take
	 * as the same changes.  Called only for a batch of at least the
	 * records key combining needs (ss_pending.c); an error fails the
	 * COMMIT.
	 */
	void		(*combine_batch) (Relation rel, const struct SSLogSource *src,
								  void (*emit) (void *arg,
												const struct SSPendingHeader *hdr,
												const void *payload),
								  void *emit_arg);
	/*
	 * Optional: does someone wait for rel's committed records to be
	 * consolidated (a LERT whose reports NOTIFY a channel)?  The
	 * background worker then takes them after streamsketch.background_delay
	 * rather than once the log is long or quiet (ss_worker.c).
	 */
	bool		(*awaited) (Relation rel);
	Size		stats_size;
	void		(*add_stats) (void *meta, const void *stats);
	/* check the table's columns; fill st's column fields unless st is NULL */
	void		(*check_columns) (Relation rel, void *st);
	/*
	 * check a metapage's contents read from disk (run by ss_meta_validate:
	 * raise any error on a violated invariant)
	 */
	void		(*check_meta) (Relation rel, const void *meta);
	/*
	 * Optional, for a structure whose scan returns rows: how many, from its
	 * metapage's contents (the planner's estimate, relation_estimate_size).
	 */
	double		(*estimate_rows) (const void *meta);
	/*
	 * Optional: the state's part of a checked metapage's contents, for a
	 * structure whose state holds more than the parameters; it calls
	 * ss_params_from_meta, which is what the storage layer does without it.
	 */
	void		(*params_from_meta) (const void *meta, void *st);
	/*
	 * Optional: refuse (42P17) leaf partition other of partitioned tree
	 * top whose contents cannot be combined with those of first, another
	 * leaf of the tree (both opened), when a partition is created or
	 * attached (ss_check_partition_trees).  Without it, any two
	 * structures of one kind combine.
	 */
	void		(*check_partition) (Relation top, Relation first,
									Relation other);
	/*
	 * Optional: the first block after the fixed layout of a new structure
	 * with st's parameters, where its log pages start; without it, 1 (the
	 * metapage alone).
	 */
	BlockNumber (*layout_end) (const void *st);
	/*
	 * Optional: the metapage contents of a new, empty structure with st's
	 * parameters, for a structure whose metapage holds more than zeros,
	 * the header and the parameters, which ss_meta_init writes (the storage
	 * layer calls it without this callback, which starts with it).
	 */
	void		(*init_meta) (const void *st, void *meta);
	/*
	 * Optional: does the label name the parameters of st (a metapage's)?
	 * Without it, the label's parameters (ss_params_from_label) are
	 * compared with st's as labels (ss_params_to_label).  A structure
	 * whose label also holds what is not a parameter (a cbt's definition,
	 * bound by object ids in the metapage and only copied into the label
	 * as text) compares the parameters alone.
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
	const struct SSScanOps *scan;	/* optional: the rows a scan returns */
	const struct SSPathOps *paths;	/* optional: reads the planner may pick */
	/*
	 * Optional: VACUUM FULL's and CLUSTER's copy of OldTable's pages into
	 * NewTable's main fork, for a structure that has space to give back;
	 * called once OldTable's change log is consolidated and empty, the
	 * copy starting an empty log.  Without it the pages are copied as
	 * they are.
	 */
	void		(*compact) (Relation OldTable, Relation NewTable);
	/* INSERT and COPY: one row of the stream */
	void		(*tuple_insert) (Relation rel, struct TupleTableSlot *slot,
								 CommandId cid, int options,
								 struct BulkInsertStateData *bistate);
} SSStructure;

/*
 * A descriptor's sizes of its state and metapage contents (types State and
 * Meta), and where its parameters are in each (the same struct).
 */
#define SS_LAYOUT(State, state_field, Meta, meta_field) \
	.state_size = sizeof(State), .meta_size = sizeof(Meta), \
	.state_params = offsetof(State, state_field), \
	.meta_params = offsetof(Meta, meta_field), \
	.params_size = sizeof(((State *) 0)->state_field)

/* A descriptor's arrays with their lengths. */
#define SS_PAGE_TYPES(array) .page_types = (array), .npage_types = lengthof(array)
#define SS_PARAMS(array) .params = (array), .nparams = lengthof(array)

/* ss_structure.c: the metapage's parameters */
extern void ss_meta_init(const SSStructure *s, const void *st, void *meta);
extern void ss_params_from_meta(const SSStructure *s, const void *meta,
								void *st);
extern void ss_new_meta(const SSStructure *s, const void *st, void *meta);

/* ss_structure.c: the parameter table's uses */
extern void ss_structure_define_settings(const SSStructure *s);
extern void ss_params_from_settings(const SSStructure *s, Relation rel,
									void *st);
extern char *ss_params_to_label(const SSStructure *s, const void *st);
extern void ss_params_from_label(const SSStructure *s, Relation rel,
								 const char *label, void *st);
extern void ss_params_check(const SSStructure *s, Relation rel, void *st,
							SSParamSource source);
extern const SSParam *ss_param_find(const SSStructure *s, const char *name);
extern bool ss_param_from_arg(const SSStructure *s, const char *name,
							  FunctionCallInfo fcinfo, int argno, void *st);
extern void ss_params_from_call(const SSStructure *s, FunctionCallInfo fcinfo,
								void *st);
extern void ss_check_structures(const SSStructure *const *list, int n);

#endif							/* SS_STRUCTURE_H */
