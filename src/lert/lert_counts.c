/*-------------------------------------------------------------------------
 *
 * lert_counts.c
 *	  Every key's exact count as a relation: lert_counts(lert, key_type),
 *	  the rows (key, count) of every key observed, committed or by the
 *	  transaction's own inserts, with lert_count's count (docs/lert.md,
 *	  "Exact counts in plain SQL").  A view over it lets plain SQL, ORMs and
 *	  postgres_fdw ask a key's count with a predicate.
 *
 * The function finds the keys where lert_count looks: the change log's
 * committed records and the transaction's own, then every cone's level 0
 * and runs; they go through a tuplesort (in work_mem, spilling beyond
 * it), and each distinct key is looked up as lert_count does, so that its
 * count is lert_count's by construction.  The log is read before the
 * levels: a record consolidated meanwhile is in the levels by the time
 * they are read.  A cone is read again when a flush of it, or a level-0
 * page freed and reused, came in between (as lert_lookup reads again).
 * A key whose count is 0 is no row, as a key never observed is none.
 *
 * The planner path (ss_planner_add_function_paths): a function scan of
 * lert_counts with a constant lert, whose quals give the key a value
 * (`key = value`, `IN`, `= ANY`, a parameter, another relation's column in
 * a nested loop), is planned as Custom Scan (lert counts): lert_count's
 * point query per value, a row where the count is not 0, the other quals
 * filtering.  The key rules are the lert lookup's (lert_key_qual).  As a
 * function scan's, the node reads no relation of the query: it is planned
 * with scanrelid 0 and the function's columns as custom_scan_tlist.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "lert.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "parser/parse_relation.h"
#include "parser/parsetree.h"
#include "ss_changelog.h"
#include "ss_planner.h"
#include "ss_queryutil.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(lert_counts);
PG_FUNCTION_INFO_V1(lert_counts_support);

#define COUNTS_FNAME	"lert_counts()"

/* reads of a cone that may find it flushed meanwhile (as the log's) */
#define COUNTS_MAX_RESTARTS 1000

/* ---- the keys a lert holds ---- */

/*
 * A key as the sort holds it: a bytea of its fingerprint and its stored
 * bytes, so that equal keys sort together.
 */
static void
put_key(Tuplesortstate *sort, uint64 fp, const char *key, uint32 len)
{
	bytea	   *b = palloc(VARHDRSZ + sizeof(fp) + len);

	SET_VARSIZE(b, VARHDRSZ + sizeof(fp) + len);
	memcpy(VARDATA(b), &fp, sizeof(fp));
	if (len > 0)
		memcpy(VARDATA(b) + sizeof(fp), key, len);
	tuplesort_putdatum(sort, PointerGetDatum(b), false);
	pfree(b);
}

/* SSLogRecordFn: an observation's key */
static void
put_record_key(uint64 pos, const SSPendingHeader *hdr, const char *payload,
			   void *arg)
{
	LertItem	item;

	if (lert_record_item(hdr, payload, &item) &&
		hdr->len - sizeof(item) == item.keylen)
		put_key((Tuplesortstate *) arg, item.fp, payload + sizeof(item),
				item.keylen);
}

/*
 * The keys of cone c's level 0 and runs, as of one metapage; false if a
 * page was freed and reused under the reader (the caller reads again).
 */
static bool
put_cone_keys(Relation rel, const LertMeta *meta, uint32 c,
			  Tuplesortstate *sort, char *area)
{
	const LertCone *cn = &meta->cones[c];

	for (uint32 p = 0; p < cn->level0.npages; p++)
	{
		BlockNumber blkno = cn->level0.start + p;

		CHECK_FOR_INTERRUPTS();
		if (lert_read_page(rel, blkno, SS_PAGE_LERT_LEVEL0, cn->level0_gen,
						   area, NULL) != LERT_OK)
			return false;
		if (!lert_l0_check(area, SS_PAGE_DATA_SIZE))
			ss_page_corrupted(rel, blkno, "The LERT level-0 page's entries are out of order or out of bounds.");
		for (int i = 0; i < lert_l0_count(area); i++)
		{
			LertEntry	e;
			const char *key = lert_l0_get(area, i, &e);

			put_key(sort, e.fp, key, e.keylen);
		}
	}
	for (uint32 j = 1; j <= meta->params.geom.nlevels; j++)
	{
		LertRunReader r;
		const LertEntry *e;
		bool		stale;

		if (cn->runs[j].ndata == 0)
			continue;
		lert_run_reader_begin(&r, rel, &cn->runs[j]);
		r.unowned = true;
		while ((e = lert_run_reader_next(&r)) != NULL)
		{
			CHECK_FOR_INTERRUPTS();
			put_key(sort, e->fp, lert_entry_key(e), e->keylen);
		}
		stale = r.stale;
		lert_run_reader_end(&r);
		if (stale)
			return false;
	}
	return true;
}

/*
 * Every key the lert holds into sort (a key may come several times): the
 * committed log's, the transaction's own, then the levels'.
 */
static void
put_all_keys(Relation rel, Tuplesortstate *sort)
{
	LertMeta   *meta = palloc(sizeof(LertMeta));
	LertMeta   *again = palloc(sizeof(LertMeta));
	char	   *area = palloc(SS_PAGE_DATA_SIZE);
	SSPendingIter it;
	SSPendingHeader hdr;
	char	   *payload;

	/* (keys seen in a log that then moved are harmless: their count is 0) */
	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;

		CHECK_FOR_INTERRUPTS();
		ss_log_read_begin(rel, &snap, attempt, false);
		if (ss_log_scan(rel, &snap, put_record_key, sort))
			break;
	}
	ss_pending_iter_begin(&it, RelationGetRelid(rel));
	while (ss_pending_iter_next(&it, &hdr, &payload))
		put_record_key(0, &hdr, payload, sort);
	ss_pending_iter_end(&it);

	if (lert_read_meta(rel, meta))
	{
		for (uint32 c = 0; c < meta->params.ncones; c++)
		{
			for (int attempt = 0;; attempt++)
			{
				if (put_cone_keys(rel, meta, c, sort, area) &&
					lert_read_meta(rel, again) &&
					again->cones[c].flushes == meta->cones[c].flushes &&
					again->cones[c].level0_gen == meta->cones[c].level0_gen)
					break;
				/* a flush of the cone came in between: read it again */
				CHECK_FOR_INTERRUPTS();
				if (attempt >= COUNTS_MAX_RESTARTS)
					ss_page_corrupted(rel, SS_METAPAGE_BLKNO,
									  "LERT cone %u kept changing under a read of its keys.",
									  c);
				if (!lert_read_meta(rel, meta))
					elog(ERROR, "LERT \"%s\" lost its metapage",
						 RelationGetRelationName(rel));
			}
		}
	}
	pfree(area);
	pfree(again);
	pfree(meta);
}

/* Is the key of type typid, the lert's key type?  (42804 if not) */
static void
check_key_type(Relation rel, const LertState *st, Oid typid)
{
	if (typid != st->keytype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("lert_counts()'s key_type is %s, but the keys of \"%s\" are %s",
						format_type_be(typid), RelationGetRelationName(rel),
						format_type_be(st->keytype)),
				 errhint("Name the key type with a NULL of it: lert_counts('%s', NULL::%s).",
						 RelationGetRelationName(rel),
						 format_type_be(st->keytype))));
}

/*
 * lert_counts(lert regclass, key_type anyelement)
 *		RETURNS TABLE (key anyelement, count bigint)
 *
 * Not STRICT: key_type is a NULL that only gives the key's type; a NULL
 * lert has no rows.
 */
Datum
lert_counts(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	rel;
	LertState  *st;
	TypeCacheEntry *tc;
	Tuplesortstate *sort;
	MemoryContext keycxt;
	MemoryContext old;
	Datum		cur;
	bool		isnull;
	bytea	   *prev = NULL;

	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0))
		return (Datum) 0;
	rel = ss_sql_open_keyed(PG_GETARG_OID(0), COUNTS_FNAME, &lert_structure);
	st = lert_get_state(rel);
	check_key_type(rel, st, get_fn_expr_argtype(fcinfo->flinfo, 1));

	tc = lookup_type_cache(BYTEAOID, TYPECACHE_LT_OPR);
	sort = tuplesort_begin_datum(BYTEAOID, tc->lt_opr, InvalidOid, false,
								 work_mem, NULL, TUPLESORT_NONE);
	put_all_keys(rel, sort);
	tuplesort_performsort(sort);

	keycxt = AllocSetContextCreate(CurrentMemoryContext, "lert_counts key",
								   ALLOCSET_DEFAULT_SIZES);
	while (tuplesort_getdatum(sort, true, &cur, &isnull, NULL))
	{
		bytea	   *b = DatumGetByteaPP(cur);
		uint32		len = VARSIZE_ANY_EXHDR(b) - sizeof(uint64);
		uint64		fp;
		int64		count;
		bool		reported;

		CHECK_FOR_INTERRUPTS();
		if (prev != NULL && VARSIZE_ANY_EXHDR(prev) == VARSIZE_ANY_EXHDR(b) &&
			memcmp(VARDATA_ANY(prev), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b)) == 0)
		{
			pfree(b);
			continue;
		}
		if (prev != NULL)
			pfree(prev);
		prev = b;
		memcpy(&fp, VARDATA_ANY(b), sizeof(fp));
		MemoryContextReset(keycxt);
		old = MemoryContextSwitchTo(keycxt);
		{
			Datum		key = lert_key_datum(st, fp, VARDATA_ANY(b) + sizeof(fp),
											 len);

			lert_lookup(rel, st, key, &count, &reported);
			if (count != 0)
			{
				Datum		values[2] = {key, Int64GetDatum(count)};
				bool		nulls[2] = {false, false};

				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
									 values, nulls);
			}
		}
		MemoryContextSwitchTo(old);
	}
	tuplesort_end(sort);
	MemoryContextDelete(keycxt);
	relation_close(rel, AccessShareLock);
	return (Datum) 0;
}

/* ---- the planner path ---- */

/*
 * lert_counts' planner support (SupportRequestRows): the rows of its full
 * result, estimated from the metapage as every cone's level 0 and its
 * largest level (the keys seen, give or take those in several levels).
 * Being called also loads this library while the planner sizes the
 * function scan, before it builds its paths: in a fresh session nothing
 * else of such a query would, and the lookup path would be missed.
 */
Datum
lert_counts_support(PG_FUNCTION_ARGS)
{
	Node	   *rawreq = (Node *) PG_GETARG_POINTER(0);
	SupportRequestRows *req;
	FuncExpr   *f;
	Const	   *lert;
	Relation	rel;
	bool		found = false;

	if (!IsA(rawreq, SupportRequestRows))
		PG_RETURN_POINTER(NULL);
	req = (SupportRequestRows *) rawreq;
	f = (FuncExpr *) req->node;
	if (!IsA(f, FuncExpr) || list_length(f->args) != 2 ||
		!IsA(linitial(f->args), Const))
		PG_RETURN_POINTER(NULL);
	lert = linitial_node(Const, f->args);
	if (lert->consttype != REGCLASSOID || lert->constisnull ||
		(rel = try_relation_open(DatumGetObjectId(lert->constvalue),
								 AccessShareLock)) == NULL)
		PG_RETURN_POINTER(NULL);
	if (rel->rd_rel->relkind == RELKIND_RELATION &&
		ss_structure_ops(rel) == &lert_structure)
	{
		const LertParams *p = &lert_get_state(rel)->p;
		LertMeta   *meta = palloc0(sizeof(LertMeta));
		double		rows = 0;

		if (ss_read_structure_meta(rel, &lert_structure, meta))
			for (uint32 c = 0; c < p->ncones; c++)
			{
				int64		deepest = 0;

				for (uint32 j = 1; j <= p->geom.nlevels; j++)
					deepest = Max(deepest, meta->cones[c].runs[j].nentries);
				rows += meta->cones[c].level0_entries + deepest;
			}
		pfree(meta);
		req->rows = Max(rows, 1);
		found = true;
	}
	/* (the lock stays until the end of the transaction, as the scan's) */
	relation_close(rel, NoLock);
	PG_RETURN_POINTER(found ? req : NULL);
}

static const SSCustomMethods counts_methods;

/* Is funcid lert_counts (by its C function, whatever its schema)? */
static bool
is_lert_counts(Oid funcid)
{
	FmgrInfo	flinfo;

	fmgr_info(funcid, &flinfo);
	return flinfo.fn_addr == lert_counts;
}

/*
 * The lert a function scan of rel reads: lert_counts with a constant lert
 * whose key type is the key_type argument's; InvalidOid otherwise.
 */
static Oid
counts_lert(RangeTblFunction *rtfunc)
{
	FuncExpr   *f = (FuncExpr *) rtfunc->funcexpr;
	Const	   *lert;

	if (!IsA(f, FuncExpr) || list_length(f->args) != 2 ||
		!IsA(linitial(f->args), Const))
		return InvalidOid;
	lert = linitial_node(Const, f->args);
	if (lert->consttype != REGCLASSOID || lert->constisnull ||
		!is_lert_counts(f->funcid))
		return InvalidOid;
	return DatumGetObjectId(lert->constvalue);
}

/* SSKeyClauseFn: is c the key column's (1), of key att's type rules? */
static bool
counts_key_clause(void *arg, int k, const SSColumnClause *c)
{
	return c->attno == 1 && lert_key_qual((Form_pg_attribute) arg, c);
}

/* Does the query need rel's whole row (no column of the node)? */
static bool
needs_whole_row(RelOptInfo *rel)
{
	Bitmapset  *attnos = NULL;
	ListCell   *lc;

	pull_varattnos((Node *) rel->reltarget->exprs, rel->relid, &attnos);
	foreach(lc, rel->baserestrictinfo)
		pull_varattnos((Node *) lfirst_node(RestrictInfo, lc)->clause,
					   rel->relid, &attnos);
	return bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber,
						 attnos);
}

/*
 * The function scan reads every key and looks each up: the lert's pages
 * once, and per row lert_count's CPU (the lookups' own pages mostly hit
 * the buffers the read brought in).  Charged to the paths core built, so
 * that the planner weighs lookups against it honestly.
 */
static void
charge_function_scan(RelOptInfo *rel, Relation relation, double levels)
{
	ss_charge_paths(rel, T_FunctionScan,
					RelationGetNumberOfBlocks(relation) * seq_page_cost +
					rel->tuples * ((levels + 1) * 50.0 * cpu_operator_cost +
								   cpu_tuple_cost));
}

/* SSFunctionPathsFn */
static void
counts_add_paths(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte,
				 RangeTblFunction *rtfunc)
{
	Oid			relid = counts_lert(rtfunc);
	Relation	relation;
	AttrNumber	keyatt,
				countatt;
	Form_pg_attribute att;
	LertState  *st;
	AttrNumber	one = 1;

	if (!OidIsValid(relid) ||
		(relation = try_relation_open(relid, AccessShareLock)) == NULL)
		return;
	if (relation->rd_rel->relkind != RELKIND_RELATION ||
		ss_structure_ops(relation) != &lert_structure ||
		exprType(lsecond(((FuncExpr *) rtfunc->funcexpr)->args)) !=
		lert_get_state(relation)->keytype)
	{
		/* (the function's errors are its own to raise) */
		relation_close(relation, AccessShareLock);
		return;
	}
	st = lert_get_state(relation);
	/* a cached plan is planned again when the lert changes */
	root->glob->relationOids = lappend_oid(root->glob->relationOids, relid);
	charge_function_scan(rel, relation, st->p.geom.nlevels);
	lert_columns(relation, &keyatt, &countatt);
	att = TupleDescAttr(RelationGetDescr(relation), keyatt - 1);

	if (!needs_whole_row(rel))
	{
		/* per lookup, lert_count's: level 0, each level, the log's page */
		ss_add_key_lookup_paths(root, rel, &one, 1, counts_key_clause, att,
								st->p.geom.nlevels, 2 + st->p.geom.nlevels,
								&counts_methods.path);
	}
	/* (the lock stays until the end of the transaction, as the scan's) */
	relation_close(relation, NoLock);
}

/*
 * CustomPathMethods.PlanCustomPath: ss_lookup_plan's, as a scan of no
 * relation (scanrelid 0) whose tuples are the function's columns;
 * custom_private ends with the lert.
 */
static Plan *
counts_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				 List *tlist, List *clauses, List *custom_plans)
{
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	Oid			relid = counts_lert(linitial_node(RangeTblFunction,
												  rte->functions));
	Relation	relation = table_open(relid, NoLock);
	AttrNumber	keyatt,
				countatt;
	SSColumnClause key;
	CustomScan *cscan;
	List	   *vars;
	ListCell   *lc;

	lert_columns(relation, &keyatt, &countatt);
	if (!ss_match_keys(root, rel, clauses, PATH_REQ_OUTER(&best_path->path),
					   1, counts_key_clause,
					   TupleDescAttr(RelationGetDescr(relation), keyatt - 1),
					   &key))
		elog(ERROR, "lert counts path lost its key clause");
	table_close(relation, NoLock);
	cscan = ss_lookup_plan(rel, best_path, tlist, clauses, &key, 1,
						   &counts_methods.scan);
	cscan->scan.scanrelid = 0;
	expandRTE(rte, rel->relid, 0, -1, false, NULL, &vars);
	foreach(lc, vars)
		cscan->custom_scan_tlist =
			lappend(cscan->custom_scan_tlist,
					makeTargetEntry(lfirst(lc),
									list_length(cscan->custom_scan_tlist) + 1,
									NULL, false));
	cscan->custom_private = lappend_int(cscan->custom_private, (int) relid);
	return &cscan->scan.plan;
}

/* ---- the scan ---- */

/* A key value's count, where it is not 0. */
typedef struct CountsFound
{
	Datum		key;
	int64		count;
} CountsFound;

typedef struct CountsState
{
	SSLookupState ls;
	CountsFound *found;			/* in keycxt */
	int			nfound;
	int			next;
} CountsState;

static TupleTableSlot *counts_next(ScanState *ss);

static Node *
counts_create_state(CustomScan *cscan)
{
	return ss_lookup_create_state(sizeof(CountsState), counts_next, "Keys");
}

/* The keys' values looked up, as lert_count does (its privileges too). */
static void
counts_find(CountsState *cs)
{
	Oid			relid = (Oid) llast_int(((CustomScan *) cs->ls.css.ss.ps.plan)->custom_private);
	Relation	rel = ss_sql_open_keyed(relid, COUNTS_FNAME, &lert_structure);
	LertState  *st = lert_get_state(rel);
	AttrNumber	keyatt,
				countatt;
	Form_pg_attribute att;
	MemoryContext old;

	lert_columns(rel, &keyatt, &countatt);
	att = TupleDescAttr(RelationGetDescr(rel), keyatt - 1);
	ss_lookup_key_values(&cs->ls, 0, att, att->attcollation, COUNTS_FNAME);
	cs->found = MemoryContextAlloc(cs->ls.keycxt,
								   sizeof(CountsFound) * Max(cs->ls.nvals[0], 1));
	cs->nfound = 0;
	cs->next = 0;
	while (ss_lookup_next_keys(&cs->ls))
	{
		CountsFound *f = &cs->found[cs->nfound];
		bool		reported;

		old = MemoryContextSwitchTo(cs->ls.rowcxt);
		lert_lookup(rel, st, cs->ls.keys[0], &f->count, &reported);
		MemoryContextSwitchTo(old);
		if (f->count == 0)
			continue;
		f->key = cs->ls.keys[0];
		cs->nfound++;
	}
	relation_close(rel, AccessShareLock);
}

/* ExecScanAccessMtd: the next key value with a count */
static TupleTableSlot *
counts_next(ScanState *ss)
{
	CountsState *cs = (CountsState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;

	ExecClearTuple(slot);
	if (!cs->ls.ready)
	{
		cs->ls.ready = true;
		counts_find(cs);
	}
	if (cs->next < cs->nfound)
	{
		CountsFound *f = &cs->found[cs->next++];

		slot->tts_values[0] = f->key;
		slot->tts_isnull[0] = false;
		slot->tts_values[1] = Int64GetDatum(f->count);
		slot->tts_isnull[1] = false;
		ExecStoreVirtualTuple(slot);
	}
	return slot;
}

static const SSCustomMethods counts_methods =
	SS_CUSTOM_METHODS("lert counts", counts_plan_path, counts_create_state);

/* Called by lert_init, at load. */
void
lert_counts_init(void)
{
	ss_planner_add_function_paths(counts_add_paths, &counts_methods.scan);
}
