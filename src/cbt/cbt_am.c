/*-------------------------------------------------------------------------
 *
 * cbt_am.c
 *	  The `cbt` access method: parameters, the definition's runtime,
 *	  INSERT, and the consolidation callback (see cbt.h).
 *
 * A cbt's state (rd_amcache) is its parameters and the definition's
 * stored text, as the metapage has them.  What running the definition
 * needs (the analyzed definition, the aggregates' functions, the map from
 * the relation's columns to the inputs) is built once per backend and
 * definition (CbtRuntime), as its table's owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "cbt.h"
#include "cbt_agg.h"
#include "cbt_am.h"
#include "cbt_groups.h"
#include "cbt_consolidate.h"
#include "common/base64.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "parser/analyze.h"
#include "parser/parsetree.h"
#include "pgstat.h"
#include "ss_changelog.h"
#include "ss_hash.h"
#include "ss_pending.h"
#include "ss_xlog.h"
#include "streamsketch.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(cbt_handler);

/* test-only settings (streamsketch.test_cbt_*) */
int			ss_test_cbt_hash_bits = 64;

/* the names of the CbtCrashPoints, by number */
static const char *const cbt_crash_points[] = {
	"none", "pass_written", "installed", "finalize_written", NULL
};

SSTestCrash cbt_crash = {
	.setting = "streamsketch.test_cbt_crash",
	.short_desc = "Stops the server at a point of a cbt's rounds (for tests only).",
	.during = "a round",
	.points = cbt_crash_points,
};

#define CBT_MIN_FANOUT	4
#define CBT_MAX_FANOUT_PARAM 32
#define CBT_MAX_BUFFER_KB (1024 * 1024)

/* ---- the label's definition ---- */

/*
 * The definition is a TEXT parameter: the label holds its text
 * base64-encoded ("-" for none), the label being a list of name=value
 * words and a query having spaces.  A label's text is only kept here
 * (label_definition); check_params resolves it as the table's owner, for
 * which it needs the relation that from_text is not given.
 */
static void
definition_from_text(const char *value, void *stp)
{
	CbtState   *st = (CbtState *) stp;
	int			enclen;
	int			maxlen;
	char	   *dec;
	int			declen;

	memset(st->definition, 0, CBT_DEF_MAX);
	st->label_definition = NULL;
	if (strcmp(value, "-") == 0)
		return;
	enclen = (int) strlen(value);
	maxlen = pg_b64_dec_len(enclen);
	dec = palloc(maxlen + 1);
	declen = pg_b64_decode(value, enclen, dec, maxlen);
	if (declen <= 0 || declen > CBT_DEF_MAX_TEXT ||
		memchr(dec, '\0', declen) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cbt definition in the label")));
	dec[declen] = '\0';
	st->label_definition = dec;
}

/*
 * A label's parameters and definition text, unresolved (check_params
 * without a relation resolves nothing).
 */
static void
label_read(const char *label, CbtState *st)
{
	memset(st, 0, sizeof(*st));
	ss_params_from_label(&cbt_structure, NULL, label, st);
}

/* The text of relid's definition as its label has it, or NULL. */
static char *
label_definition(Oid relid)
{
	char	   *label = OidIsValid(relid) ? ss_get_label(relid) : NULL;
	CbtState   *st;

	if (label == NULL)
		return NULL;
	st = palloc(sizeof(CbtState));
	label_read(label, st);
	return st->label_definition;
}

/*
 * The definition st's table runs: its bound query, or, if the metapage's
 * ids are another cluster's or it holds text, the label's text resolved
 * now (cbt_defstore.c).  NULL if there is none.  restoring: for a label
 * being given or a definition only deparsed, without the owner's
 * privilege checks (cbt_def_load); running it checks them.
 */
static CbtDef *
state_definition(const CbtState *st, bool restoring)
{
	char	   *text;

	switch (cbt_def_stored_form(st->definition))
	{
		case CBT_DEF_NONE:
			return NULL;
		case CBT_DEF_BOUND:
			return cbt_def_from_tree(cbt_def_stored_tree(st->definition),
									 st->owner, !restoring);
		case CBT_DEF_BOUND_ELSEWHERE:
		case CBT_DEF_TEXT:
			break;
	}
	text = label_definition(st->relid);
	if (text == NULL && cbt_def_stored_form(st->definition) == CBT_DEF_TEXT)
		text = pstrdup(st->definition);
	if (text == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the definition of cbt \"%s\" was bound in another cluster",
						get_rel_name(st->relid)),
				 errdetail("Its metapage names the objects it uses by ids of another cluster, and the table has no label to resolve them from."),
				 errhint("Restore the table's label from a dump of the cluster it was copied from.")));
	return cbt_def_load(text, st->owner, restoring);
}

/* The text of st's definition, with its columns' current names. */
static char *
state_definition_text(const CbtState *st)
{
	CbtDef	   *def = state_definition(st, true);
	const char *names[CBT_MAX_COLUMNS];

	if (def == NULL)
		return NULL;
	for (int i = 0; i < st->ncols; i++)
		names[i] = NameStr(st->colnames[i]);
	return cbt_def_deparse(def, st->ncols, names);
}

/* cbt_info's definition: what a dump's label would hold now. */
char *
cbt_definition_text(Relation rel)
{
	return state_definition_text(cbt_get_state(rel));
}

/* The definition's label text: what cbt_definition_text gives, encoded. */
static char *
definition_to_text(const void *stp)
{
	char	   *text = state_definition_text((const CbtState *) stp);
	int			len = text ? (int) strlen(text) : 0;
	char	   *enc = palloc(pg_b64_enc_len(len) + 1);
	int			enclen = pg_b64_encode(text ? text : "", len, enc,
									   pg_b64_enc_len(len));

	if (enclen < 0)
		elog(ERROR, "could not encode a cbt definition");
	enc[enclen] = '\0';
	return enclen > 0 ? enc : pstrdup("-");
}

/* The relation's columns, for the definition's text. */
static void
state_set_columns(Relation rel, CbtState *st)
{
	TupleDesc	desc = RelationGetDescr(rel);

	st->relid = RelationGetRelid(rel);
	st->owner = rel->rd_rel->relowner;
	st->ncols = 0;
	for (int i = 0; i < desc->natts && st->ncols < CBT_MAX_COLUMNS; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped)
			st->colnames[st->ncols++] = att->attname;
	}
}

/*
 * The metapage agrees with the label if the parameters do: the definition
 * is bound by ids in the metapage, protected by its checksum, and the
 * label's text of it is only the dump's copy, stale until the event
 * trigger that follows renames has run.
 */
static bool
cbt_label_agrees(Relation rel, const char *label, const void *stp)
{
	const CbtParams *have = &((const CbtState *) stp)->params;
	CbtState   *st = palloc(sizeof(CbtState));
	const CbtParams *p = &st->params;

	label_read(label, st);
	return p->root_buffer_kb == have->root_buffer_kb &&
		p->node_buffer_kb == have->node_buffer_kb &&
		p->fanout == have->fanout &&
		p->compression == have->compression &&
		p->hash_bits == have->hash_bits &&
		p->seed == have->seed;
}

/*
 * Before its label is written again after a rename: a definition still
 * held as another cluster's ids (pg_upgrade) or as text is resolved from
 * the label and stored bound to this cluster's ids now, while the label
 * can still name what it uses; if it no longer can (the statement renamed
 * one of them), the statement is refused, which undoes the rename.
 */
static void
cbt_rebind(Relation rel)
{
	CbtState   *st = cbt_get_state(rel);
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	CbtDef	   *def = NULL;
	SSXLogState *state;
	Buffer		metabuf;
	CbtMeta    *live;

	if (cbt_def_stored_form(st->definition) == CBT_DEF_NONE ||
		cbt_def_stored_form(st->definition) == CBT_DEF_BOUND ||
		RecoveryInProgress())
		return;
	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		def = state_definition(st, false);
		MemoryContextSwitchTo(cxt);
		ReleaseCurrentSubTransaction();
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		CurrentResourceOwner = owner;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cbt \"%s\" cannot follow this statement",
						RelationGetRelationName(rel)),
				 errdetail("Its definition is still held by another cluster's object ids (pg_upgrade) or as text, and its label no longer resolves: %s",
						   edata->message),
				 errhint("Run cbt_finalize() on the table before the statement: it stores the definition bound to this cluster's objects.")));
	}
	PG_END_TRY();

	/* the definition field alone: a round's install writes the same bytes */
	state = ss_xlog_start(rel);
	live = (CbtMeta *) ss_meta_register(rel, SS_KIND_CBT, state, &metabuf);
	cbt_def_store(def, live->definition);
	ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
	CacheInvalidateRelcache(rel);
	ss_forget_state(rel);
}

/* A restored definition: the table depends on what it names. */
static void
cbt_label_set(Relation rel, const void *stp)
{
	CbtDef	   *def = state_definition((const CbtState *) stp, true);

	if (def != NULL)
		cbt_def_record_dependencies(def, RelationGetRelid(rel));
}

/* ---- state ops ---- */

/* The columns are checked against the definition when it is loaded. */
static void
cbt_state_columns(Relation rel, void *st)
{
	if (RelationGetDescr(rel)->natts < 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("a cbt table has group keys and aggregates"),
				 errhint("Create it with cbt_create().")));
	if (st != NULL)
		state_set_columns(rel, (CbtState *) st);
}

/*
 * The planner's row estimate: the groups the last cbt_finalize counted,
 * else the rows in the tree (at least as many as its groups).
 */
static double
cbt_estimate_rows(const void *metap)
{
	const CbtMeta *m = (const CbtMeta *) metap;

	return (double) (m->groups_estimate > 0 ? m->groups_estimate : m->rows);
}

static void
cbt_check_meta(Relation rel, const void *metap)
{
	const CbtMeta *m = (const CbtMeta *) metap;
	const CbtParams *p = &m->params;
	BlockNumber end = m->hdr.log.alloc_end;

	if (p->seed != m->hdr.seed)
		elog(ERROR, "the parameters' seed %u differs from the header's %u",
			 p->seed, m->hdr.seed);
	if (p->root_buffer_kb < 64 || p->root_buffer_kb > CBT_MAX_BUFFER_KB ||
		p->node_buffer_kb < 16 || p->node_buffer_kb > CBT_MAX_BUFFER_KB ||
		p->fanout < CBT_MIN_FANOUT || p->fanout > CBT_MAX_FANOUT_PARAM ||
		p->hash_bits < 1 || p->hash_bits > 64)
		elog(ERROR, "a parameter is out of range");
	cbt_def_check_stored(m->definition);
	if (m->nfree > CBT_MAX_FREE_EXTENTS || m->height > CBT_MAX_HEIGHT ||
		(m->root == InvalidBlockNumber) != (m->height == 0) ||
		(m->root != InvalidBlockNumber &&
		 (m->root == SS_METAPAGE_BLKNO || m->root >= end)) ||
		m->root_generation > m->generation || m->rows < 0)
		elog(ERROR, "the tree's root, height or counters are out of range");
	for (uint32 i = 0; i < m->nfree; i++)
	{
		const CbtFreeExtent *f = &m->free_ext[i];

		if (f->start < 1 || f->start >= end || f->npages == 0 ||
			f->npages > end - f->start ||
			(i > 0 && f->start < m->free_ext[i - 1].start + m->free_ext[i - 1].npages))
			elog(ERROR, "free extent %u is out of range or order", i);
	}
	if (m->overflow_extents > CBT_MAX_FREE_EXTENTS + CBT_MAX_OVERFLOW_EXTENTS ||
		(m->overflow_extents > 0 &&
		 (m->overflow_start < 1 || m->overflow_start >= end ||
		  cbt_overflow_pages(m->overflow_extents) > end - m->overflow_start ||
		  m->overflow_free_pages < m->overflow_extents ||
		  m->overflow_free_pages > end)))
		elog(ERROR, "the free list's overflow pages are out of range");
}

/* The parameters and the bound definition. */
static void
cbt_params_from_meta(const void *metap, void *stp)
{
	ss_params_from_meta(&cbt_structure, metap, stp);
	memcpy(((CbtState *) stp)->definition, ((const CbtMeta *) metap)->definition,
		   CBT_DEF_MAX);
}

/* ss_meta_init's contents, with an empty tree and the definition */
static void
cbt_init_meta(const void *stp, void *metap)
{
	CbtMeta    *m = (CbtMeta *) metap;

	ss_meta_init(&cbt_structure, stp, m);
	m->root = InvalidBlockNumber;
	memcpy(m->definition, ((const CbtState *) stp)->definition, CBT_DEF_MAX);
}

/*
 * What the parameter table cannot say.  From the settings, the hash's
 * bits are streamsketch.test_cbt_hash_bits (a test-only setting, defined
 * in cbt_init).  With a relation (CREATE TABLE ... USING cbt, a label),
 * the state gets its columns, and a label's definition is resolved as the
 * owner would resolve it, once, and kept bound (a restore, pg_upgrade's
 * schema, TRUNCATE of a table whose metapage is damaged).  CREATE TABLE
 * ... USING cbt has no definition to take: the table gets one from a label
 * (a restored dump); until then it refuses inserts.  Without a relation (a
 * constructor's parameters, a label only read) nothing is resolved.
 */
static void
cbt_check_params(Relation rel, void *stp, SSParamSource source)
{
	CbtState   *st = (CbtState *) stp;

	if (source == SS_PARAMS_SETTINGS)
		st->params.hash_bits = (uint32) ss_test_cbt_hash_bits;
	if (rel == NULL)
		return;
	state_set_columns(rel, st);
	if (st->label_definition != NULL)
		cbt_def_store(cbt_def_load(st->label_definition,
								   rel->rd_rel->relowner, true),
					  st->definition);
	st->label_definition = NULL;
}

/*
 * The parameters, in label order.  fanout is a uint32 read as signed (its
 * range fits): a negative argument is then reported as itself.
 */
static const SSParam cbt_params[] = {
	{.name = "root_buffer_kb", .argument = "root_buffer", .type = SS_PARAM_INT,
		SS_FIELD(CbtState, params.root_buffer_kb),
		.min = 64, .max = CBT_MAX_BUFFER_KB,
		.setting = "cbt_root_buffer",
		.short_desc = "Change log a round of a new cbt empties into its tree at once.",
		.long_desc = "The root buffer of the compressed buffer tree: larger rounds aggregate more rows per group before they reach the tree.",
	.setting_flags = GUC_UNIT_KB, .boot = 4096},
	{.name = "node_buffer_kb", .argument = "node_buffer", .type = SS_PARAM_INT,
		SS_FIELD(CbtState, params.node_buffer_kb),
		.min = 16, .max = CBT_MAX_BUFFER_KB,
		.setting = "cbt_node_buffer",
		.short_desc = "Compressed partial aggregates a node of a new cbt holds before it is emptied.",
	.setting_flags = GUC_UNIT_KB, .boot = 1024},
	{.name = "fanout", .argument = "fanout", .type = SS_PARAM_INT, SS_FIELD(CbtState, params.fanout),
		.is_signed = true, .min = CBT_MIN_FANOUT, .max = CBT_MAX_FANOUT_PARAM,
		.setting = "cbt_fanout",
		.short_desc = "Children of a node of a new cbt (the b of its (a,b)-tree).",
	.boot = 16},
	{.name = "compression", .argument = "compression", .type = SS_PARAM_BOOL,
		SS_FIELD(CbtState, params.compression),
		.setting = "cbt_compression",
		.short_desc = "Whether a new cbt compresses its fragments (LZ4).",
	.boot = true},
	{.name = "hash_bits", .type = SS_PARAM_INT,
		SS_FIELD(CbtState, params.hash_bits), .min = 1, .max = 64,
	.boot = 64, .internal = true, .derived = true},
	{.name = "seed", .type = SS_PARAM_INT, SS_FIELD(CbtState, params.seed),
	.min = 0, .max = PG_UINT32_MAX, .boot = SS_DEFAULT_SEED, .internal = true},
	{.name = "definition", .type = SS_PARAM_TEXT,
		.to_text = definition_to_text, .from_text = definition_from_text,
	.internal = true},
};

static bool cbt_consolidate(SSConsolidation *c);

static void cbt_tuple_insert(Relation rel, TupleTableSlot *slot,
				CommandId cid, int options,
				struct BulkInsertStateData *bistate);

static const uint16 cbt_page_types[] = {SS_PAGE_CBT_NODE, SS_PAGE_CBT_FRAGMENT, SS_PAGE_CBT_FREE};	/* not CBT_FREE_PAGE_TYPE_EARLIER, which only a cbt reads */

const SSStructure cbt_structure = {
	.name = "cbt",
	.amname = "cbt",
	.constructor = "cbt_create()",
	SS_PAGE_TYPES(cbt_page_types),
	.init = cbt_init,
	.kind = SS_KIND_CBT,
	SS_LAYOUT(CbtState, params, CbtMeta, params),
	.consolidate = cbt_consolidate,
	.check_columns = cbt_state_columns,
	.check_meta = cbt_check_meta,
	.estimate_rows = cbt_estimate_rows,
	.params_from_meta = cbt_params_from_meta,
	.init_meta = cbt_init_meta,
	SS_PARAMS(cbt_params),
	.check_params = cbt_check_params,
	.label_agrees = cbt_label_agrees,
	.label_set = cbt_label_set,
	.rebind = cbt_rebind,
	.scan = &cbt_scan_ops,
	.paths = &cbt_path_ops,
	.combine_batch = cbt_combine_batch,
	.tuple_insert = cbt_tuple_insert,
	.check_partition = cbt_check_partition,
};

CbtState *
cbt_get_state(Relation rel)
{
	return (CbtState *) ss_get_state(rel, &cbt_structure);
}

/* ---- the definition's runtime ---- */

/*
 * The runtimes of this backend, by relation.  A relcache invalidation of
 * the relation (ALTER, GRANT, VACUUM's statistics, DROP, a changed
 * label) marks its entry stale: the next use builds the runtime again
 * (the owner, or the aggregates' privileges, may have changed), and the
 * entries of relations that no longer exist are dropped.  A replaced runtime may
 * still be used by a scan of this transaction (a cursor), so it is freed
 * at the transaction's end, when no scan is left.
 */
typedef struct RuntimeEntry
{
	Oid			relid;			/* hash key */
	CbtRuntime *rt;
	bool		stale;
} RuntimeEntry;

static HTAB *runtimes = NULL;
static bool runtimes_stale = false;
static List *retired_runtimes = NIL;	/* in TopMemoryContext */

static void
column_mismatch(Relation rel, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("the columns of cbt \"%s\" do not match its definition",
					RelationGetRelationName(rel)),
			 errdetail_internal("%s", detail)));
}

/*
 * Map the relation's columns to the definition's keys, results, inputs, by
 * position: cbt_create made them in cbt_def_relation_columns' order, and
 * columns cannot be added, dropped or retyped (the guard rails), only
 * renamed.
 */
static void
map_columns(Relation rel, CbtRuntime *rt)
{
	const CbtDef *def = rt->def;
	TupleDesc	desc = RelationGetDescr(rel);
	CbtColumn	cols[CBT_MAX_COLUMNS];
	int			ncols = cbt_def_relation_columns(def, cols);
	int			uncarried[CBT_MAX_COLUMNS];
	int			nuncarried = 0;
	int			n = 0;

	/* the inputs no result carries, in order: the last columns */
	for (int in = 0; in < def->ninputs; in++)
	{
		bool		carried = false;

		for (int a = 0; a < def->naggs; a++)
			carried |= def->aggs[a].carried_input == in;
		if (!carried)
			uncarried[nuncarried++] = in;
	}
	if (desc->natts < ncols)
		column_mismatch(rel, "The table has fewer columns than its definition.");
	rt->input_src = MemoryContextAllocZero(rt->cxt, sizeof(int) * (def->nkeys + def->ninputs));
	rt->result_takes_input = MemoryContextAllocZero(rt->cxt, sizeof(bool) * def->naggs);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (n >= ncols || att->atttypid != cols[n].type)
			column_mismatch(rel, psprintf("Column %d is \"%s\" of type %s.", i + 1,
										  NameStr(att->attname),
										  format_type_be(att->atttypid)));
		if (n < def->nkeys)
			rt->input_src[n] = i;
		else if (n < def->nkeys + def->naggs)
		{
			int			a = n - def->nkeys;

			rt->result_attno[a] = i;
			if (def->aggs[a].carried_input >= 0)
			{
				rt->input_src[def->nkeys + def->aggs[a].carried_input] = i;
				rt->result_takes_input[a] = true;
			}
		}
		else
			rt->input_src[def->nkeys + uncarried[n - def->nkeys - def->naggs]] = i;
		n++;
	}
	if (n != ncols)
		column_mismatch(rel, "The table has fewer columns than its definition.");
}

static void
runtime_free(CbtRuntime *rt, bool commit)
{
	if (rt->run)
		cbt_agg_end(rt->run, commit);
	MemoryContextDelete(rt->cxt);
}

static void
runtime_retire(CbtRuntime *rt)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	retired_runtimes = lappend(retired_runtimes, rt);
	MemoryContextSwitchTo(old);
}

/* RelcacheCallbackFunction: relid's runtime (every one if invalid) is stale. */
static void
runtimes_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS seq;
	RuntimeEntry *e;

	if (runtimes == NULL)
		return;
	if (OidIsValid(relid))
	{
		e = hash_search(runtimes, &relid, HASH_FIND, NULL);
		if (e != NULL)
			e->stale = runtimes_stale = true;
		return;
	}
	hash_seq_init(&seq, runtimes);
	while ((e = hash_seq_search(&seq)) != NULL)
		e->stale = runtimes_stale = true;
}

/* XactCallback: free the runtimes replaced during the transaction. */
static void
runtimes_at_xact_end(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PREPARE && event != XACT_EVENT_PARALLEL_COMMIT &&
		event != XACT_EVENT_PARALLEL_ABORT)
		return;
	foreach(lc, retired_runtimes)
		runtime_free((CbtRuntime *) lfirst(lc), event != XACT_EVENT_ABORT &&
					 event != XACT_EVENT_PARALLEL_ABORT);
	list_free(retired_runtimes);
	retired_runtimes = NIL;
}

/* Retire the stale runtimes of relations that no longer exist. */
static void
runtimes_sweep(void)
{
	HASH_SEQ_STATUS seq;
	RuntimeEntry *e;

	runtimes_stale = false;
	hash_seq_init(&seq, runtimes);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (!e->stale || SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->relid)))
			continue;
		if (e->rt != NULL)
			runtime_retire(e->rt);
		(void) hash_search(runtimes, &e->relid, HASH_REMOVE, NULL);
	}
}

/*
 * The runtime of rel's definition, built (as the owner) the first time
 * and again when the definition, the owner or the columns changed.
 */
CbtRuntime *
cbt_runtime(Relation rel)
{
	CbtState   *st = cbt_get_state(rel);
	Oid			relid = RelationGetRelid(rel);
	RuntimeEntry *e;
	bool		found;
	CbtRuntime *rt;
	MemoryContext cxt;
	MemoryContext old;
	CbtOwnerSave save;

	if (cbt_def_stored_form(st->definition) == CBT_DEF_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cbt \"%s\" has no definition", RelationGetRelationName(rel)),
				 errdetail("CREATE TABLE ... USING cbt cannot say what to group by and aggregate."),
				 errhint("Create it with cbt_create(), or restore its dump's security label.")));
	if (runtimes == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(RuntimeEntry);
		ctl.hcxt = TopMemoryContext;
		runtimes = hash_create("cbt runtimes", 16, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	if (runtimes_stale)
		runtimes_sweep();
	e = hash_search(runtimes, &relid, HASH_ENTER, &found);
	if (found && e->rt != NULL)
	{
		rt = e->rt;
		if (!e->stale && memcmp(rt->definition, st->definition, CBT_DEF_MAX) == 0 &&
			rt->owner == rel->rd_rel->relowner &&
			rt->natts == RelationGetDescr(rel)->natts)
			return rt;
		e->rt = NULL;
		runtime_retire(rt);
	}
	e->rt = NULL;
	e->stale = false;

	cxt = AllocSetContextCreate(TopMemoryContext, "cbt runtime",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	rt = palloc0(sizeof(CbtRuntime));
	rt->cxt = cxt;
	rt->definition = palloc(CBT_DEF_MAX);
	memcpy(rt->definition, st->definition, CBT_DEF_MAX);
	rt->owner = rel->rd_rel->relowner;
	rt->natts = RelationGetDescr(rel)->natts;
	PG_TRY();
	{
		rt->def = state_definition(st, false);
		rt->result_attno = palloc0(sizeof(int) * rt->def->naggs);
		map_columns(rel, rt);
		cbt_as_owner(rel, &save);
		rt->run = cbt_agg_begin(rt->def, cxt);
		cbt_as_caller(&save);
		rt->input_slot = MakeSingleTupleTableSlot(cbt_agg_input_desc(rt->run),
												  &TTSOpsVirtual);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	e->rt = rt;
	return rt;
}

/*
 * Aggregates are user code: run them as the table's owner, restricted,
 * with the pinned search_path (docs/cbt.md).  An error restores the
 * caller's identity and settings with the transaction's abort.
 */
void
cbt_as_owner(Relation rel, CbtOwnerSave *save)
{
	GetUserIdAndSecContext(&save->userid, &save->sec_context);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save->sec_context | SECURITY_RESTRICTED_OPERATION);
	save->nest = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

void
cbt_as_caller(CbtOwnerSave *save)
{
	AtEOXact_GUC(false, save->nest);
	SetUserIdAndSecContext(save->userid, save->sec_context);
}

/* ---- INSERT ---- */

static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;

/*
 * A row with values in the aggregates' columns is a group, as a dump
 * writes it: with every column of the table.  The natural positional
 * INSERT INTO t SELECT key, input ... fills the aggregates' columns, which
 * come before the inputs, with the inputs; an INSERT that gives an
 * aggregate's column (one that carries no input) a value but does not
 * name every column is refused when it is analyzed, naming the columns to
 * write.  (The library is loaded by then: analysis opened the table.)
 */
static void
cbt_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	RangeTblEntry *rte;
	Relation	rel;
	CbtRuntime *rt;
	TupleDesc	desc;
	int			ncols = 0;
	int			ntargets = 0;
	int			agg_named = -1;
	ListCell   *lc;

	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	if (query->commandType != CMD_INSERT || query->resultRelation <= 0)
		return;
	rte = rt_fetch(query->resultRelation, query->rtable);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION)
		return;
	rel = relation_open(rte->relid, NoLock);	/* the parser locked it */
	if (ss_structure_ops(rel) != &cbt_structure ||
		cbt_def_stored_form(cbt_get_state(rel)->definition) == CBT_DEF_NONE)
	{
		relation_close(rel, NoLock);
		return;
	}
	rt = cbt_runtime(rel);
	desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++)
		ncols += !TupleDescAttr(desc, i)->attisdropped;
	foreach(lc, query->targetList)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);

		if (te->resjunk)
			continue;
		ntargets++;
		for (int a = 0; a < rt->def->naggs; a++)
			if (!rt->result_takes_input[a] &&
				te->resno == rt->result_attno[a] + 1 && agg_named < 0)
				agg_named = a;
	}
	if (agg_named >= 0 && ntargets < ncols)
	{
		StringInfoData cols;

		/* the keys, then the columns that take inputs */
		initStringInfo(&cols);
		for (int i = 0; i < rt->def->nkeys + rt->def->ninputs; i++)
			appendStringInfo(&cols, "%s%s", i > 0 ? ", " : "",
							 quote_identifier(NameStr(TupleDescAttr(desc, rt->input_src[i])->attname)));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("INSERT into cbt \"%s\" gives aggregate column \"%s\" a value",
						RelationGetRelationName(rel),
						NameStr(TupleDescAttr(desc, rt->result_attno[agg_named])->attname)),
				 errdetail("A cbt's columns are its group keys, its aggregates, then its inputs; a row with aggregate values is a group, as a dump writes it with every column."),
				 errhint("Name the columns to write: INSERT INTO %s (%s) ...",
						 quote_identifier(RelationGetRelationName(rel)), cols.data)));
	}
	relation_close(rel, NoLock);
}

/*
 * A row with a value in an aggregate's own column is a group, as a dump
 * writes it: its key and final values, merged into the table's group of
 * that key as a PAO (an SS_PENDING_MERGE record).  Only a definition whose
 * results are its states can take it (cbt_def_restorable).
 */
static void
insert_group(Relation rel, CbtRuntime *rt, TupleTableSlot *slot,
			 TupleTableSlot *key, uint64 hash)
{
	const CbtDef *def = rt->def;
	Datum	   *values = palloc(sizeof(Datum) * def->naggs);
	bool	   *isnull = palloc(sizeof(bool) * def->naggs);
	StringInfoData pao;
	StringInfoData rec;
	int			bad;

	if (!cbt_def_restorable(def, &bad))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cbt \"%s\" cannot take a group's final values back",
						RelationGetRelationName(rel)),
				 errdetail("A row with a value in an aggregate's column is read as a group, as a dump writes it, but the result of aggregate column \"%s\" is not its state.",
						   NameStr(TupleDescAttr(RelationGetDescr(rel), rt->result_attno[bad])->attname)),
				 errhint("Insert the inputs and leave the aggregates' columns NULL.  Back up this table physically (pg_basebackup, pg_upgrade): its dump cannot be restored.")));
	for (int i = 0; i < def->ninputs; i++)
	{
		bool		carried = false;

		for (int a = 0; a < def->naggs; a++)
			carried |= rt->result_takes_input[a] && def->aggs[a].carried_input == i;
		if (!carried && !slot->tts_isnull[rt->input_src[def->nkeys + i]])
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a row of cbt \"%s\" cannot have both inputs and aggregate values",
							RelationGetRelationName(rel)),
					 errdetail("A row with a value in an aggregate's column is a group, as a dump writes it; input \"%s\" is not NULL.",
							   NameStr(TupleDescAttr(RelationGetDescr(rel), rt->input_src[def->nkeys + i])->attname)),
					 errhint("Insert the inputs and leave the aggregates' columns NULL.")));
	}
	for (int a = 0; a < def->naggs; a++)
	{
		values[a] = slot->tts_values[rt->result_attno[a]];
		isnull[a] = slot->tts_isnull[rt->result_attno[a]];
	}
	initStringInfo(&pao);
	cbt_pao_of_results(rt->run, def->nkeys, key, values, isnull, &pao);
	initStringInfo(&rec);
	appendBinaryStringInfo(&rec, (const char *) &hash, sizeof(hash));
	appendBinaryStringInfo(&rec, pao.data, pao.len);
	ss_pending_add(rel, SS_PENDING_MERGE, rec.data, (uint32) rec.len);
	pfree(rec.data);
	pfree(pao.data);
	pfree(values);
	pfree(isnull);
}

/*
 * A row gives the group key and the inputs; the record is the key's hash
 * and the row's keys and inputs (SS_PENDING_ITEM).  A row with a value in
 * a column of an aggregate that carries no input is a group instead
 * (insert_group).
 */
static void
cbt_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
				 int options, struct BulkInsertStateData *bistate)
{
	CbtRuntime *rt = cbt_runtime(rel);
	const CbtDef *def = rt->def;
	CbtState   *st = cbt_get_state(rel);
	TupleTableSlot *in = rt->input_slot;
	StringInfoData rec;
	uint64		hash;
	bool		group = false;

	pgstat_count_heap_insert(rel, 1);
	slot_getallattrs(slot);
	slot->tts_tableOid = RelationGetRelid(rel);
	ItemPointerSetInvalid(&slot->tts_tid);

	for (int a = 0; a < def->naggs; a++)
		if (!rt->result_takes_input[a] && !slot->tts_isnull[rt->result_attno[a]])
			group = true;

	ExecClearTuple(in);
	for (int i = 0; i < def->nkeys + def->ninputs; i++)
	{
		in->tts_values[i] = slot->tts_values[rt->input_src[i]];
		in->tts_isnull[i] = slot->tts_isnull[rt->input_src[i]];
	}
	ExecStoreVirtualTuple(in);
	hash = cbt_agg_key_hash(rt->run, in, st->params.seed);
	if (st->params.hash_bits < 64)
		hash &= (UINT64CONST(1) << st->params.hash_bits) - 1;

	if (group)
		insert_group(rel, rt, slot, in, hash);
	else
	{
		initStringInfo(&rec);
		appendBinaryStringInfo(&rec, (const char *) &hash, sizeof(hash));
		cbt_agg_row_serialize(rt->run, in, def->nkeys + def->ninputs, &rec);
		ss_pending_add(rel, SS_PENDING_ITEM, rec.data, (uint32) rec.len);
		pfree(rec.data);
	}
	ExecClearTuple(in);
}

/* ---- consolidation ---- */

static bool
cbt_consolidate(SSConsolidation *c)
{
	Relation	rel = c->rel;
	CbtRuntime *rt = cbt_runtime(rel);
	CbtMeta    *meta = palloc(sizeof(CbtMeta));
	CbtRound	r;
	CbtOwnerSave save;

	if (!ss_read_structure_meta(rel, &cbt_structure, meta))
		elog(ERROR, "cbt \"%s\" has a change log but no metapage",
			 RelationGetRelationName(rel));
	cbt_as_owner(rel, &save);
	cbt_round_begin(&r, rel, meta, rt->run, rt->def);
	cbt_round_records(&r, c);
	cbt_round_end(&r);
	cbt_as_caller(&save);
	pfree(meta);
	return true;
}

/* ---- the handler and the settings ---- */


Datum
cbt_handler(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(ss_tableam_routine(&cbt_structure));
}

/* Called by _PG_init; the parameters' settings come from cbt_params. */
void
cbt_init(void)
{
	CacheRegisterRelcacheCallback(runtimes_invalidate, (Datum) 0);
	RegisterXactCallback(runtimes_at_xact_end, NULL);
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = cbt_post_parse_analyze;
	ss_test_define_int("streamsketch.test_cbt_hash_bits",
					   "Bits of the group key hash a new cbt keeps (for tests: fewer bits force collisions).",
					   NULL, &ss_test_cbt_hash_bits, 64, 1, 64, NULL);
	ss_test_crash_define(&cbt_crash);
}
