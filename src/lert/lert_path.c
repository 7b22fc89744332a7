/*-------------------------------------------------------------------------
 *
 * lert_path.c
 *	  A lert's plain SQL lookups (SSStructure.paths): a query whose quals
 *	  give the key a value (`key = value`, `key = ANY (array)`, `key IN
 *	  (...)`) looks each value up as lert_reported does, instead of reading
 *	  every report (docs/lert.md, "Plain SQL lookups").  The values are
 *	  constants, parameters or, for a path parameterized by other
 *	  relations, their columns (a nested loop probes per outer row).  The
 *	  other quals filter the rows found.
 *
 * A key found reported is a row.  Its count column is the count at the
 * report, which the key's entries flagged reported hold (LertCount): a
 * lookup reads the same pages whether the query needs the count or not,
 * the key's level-0 page and a data page per on-disk level, and no report
 * page.  A lert created before that (LertMeta.format 0) keeps positions
 * there: for it, one pass over the report pages finds the reports of the
 * keys found reported, stopping at the last.
 *
 * Keys are found by their binary form (lert_key_fingerprint), so a qual
 * is used only where it selects exactly the keys the scan would return:
 * the key type's equality (or a cross-type one of its btree family whose
 * value casts exactly to the key type, as ss_key_equality), under which
 * equal values have equal images (the btree "equalimage" support: text in
 * a deterministic collation, integers; not numeric, float or a
 * nondeterministic collation).  A NULL value matches nothing, as `=` does.
 *
 * What the lookup sees is what the scan does: it consolidates what is
 * committed and waits for a round in progress once per scan, as
 * lert_reported does, and the transaction's own uncommitted inserts make
 * no report in either.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "lert.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "parser/parsetree.h"
#include "ss_planner.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

/* restarts of a key's lookup, each after a flush of its cone in between */
#define LOOKUP_MAX_RESTARTS 1000

static const SSCustomMethods lert_methods;

/* The key and count columns (0: none) of a lert table. */
void
lert_columns(Relation rel, AttrNumber *key, AttrNumber *count)
{
	TupleDesc	desc = RelationGetDescr(rel);

	*key = *count = InvalidAttrNumber;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (*key == InvalidAttrNumber)
			*key = att->attnum;
		else if (*count == InvalidAttrNumber)
			*count = att->attnum;
	}
}

/*
 * Do values of type typid (the key's, or the type of the operator's input
 * it is binary-coercible to: text for varchar) that are equal under
 * collation have one image?
 */
static bool
equal_image(Oid typid, Oid collation)
{
	TypeCacheEntry *tc = lookup_type_cache(typid, TYPECACHE_BTREE_OPFAMILY);
	Oid			proc;

	if (!OidIsValid(tc->btree_opf) ||
		(type_is_collatable(typid) && !OidIsValid(collation)))
		return false;
	proc = get_opfamily_proc(tc->btree_opf, typid, typid, BTEQUALIMAGE_PROC);
	return OidIsValid(proc) &&
		DatumGetBool(OidFunctionCall1Coll(proc, collation,
										  ObjectIdGetDatum(typid)));
}

/* SSKeyClauseFn: does c select exactly the key equal to its value? */
static bool
key_clause(void *arg, int k, const SSColumnClause *c)
{
	Relation	rel = (Relation) arg;
	AttrNumber	key,
				count;
	Form_pg_attribute att;

	lert_columns(rel, &key, &count);
	att = TupleDescAttr(RelationGetDescr(rel), key - 1);
	return c->attno == key && lert_key_qual(att, c);
}

/*
 * Does c, on a column holding the keys of key column att, select exactly
 * the key equal to its value?  Not under a length modifier (the value may
 * need padding the cast does not do), nor bpchar's equality, which
 * ignores trailing blanks its images keep.
 */
bool
lert_key_qual(Form_pg_attribute att, const SSColumnClause *c)
{
	return att->atttypmod < 0 && att->atttypid != BPCHAROID &&
		ss_key_equality(c, att->atttypid) &&
		equal_image(c->lefttype, c->inputcollid);
}

/* Does the query need the count column (or the whole row) of rel? */
static bool
needs_count(RelOptInfo *rel, Relation relation, List *clauses)
{
	AttrNumber	key,
				count;
	Bitmapset  *attnos = NULL;
	ListCell   *lc;

	lert_columns(relation, &key, &count);
	if (count == InvalidAttrNumber)
		return false;
	pull_varattnos((Node *) rel->reltarget->exprs, rel->relid, &attnos);
	foreach(lc, clauses)
		pull_varattnos((Node *) lfirst_node(RestrictInfo, lc)->clause,
					   rel->relid, &attnos);
	return bms_is_member(count - FirstLowInvalidHeapAttributeNumber, attnos) ||
		bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber,
					  attnos);
}

/*
 * SSPathOps.add_paths.  Per lookup, the count or not: an index page per
 * on-disk level (shared by all lookups); the metapage, a level-0 page and
 * a data page per on-disk level of its own.  (A lert of format 0 also
 * passes over the report pages when the count is needed: rare, and not
 * costed.)
 */
static void
lert_add_paths(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte,
			   Relation relation)
{
	LertState  *st = lert_get_state(relation);
	AttrNumber	keyatt,
				countatt;

	lert_columns(relation, &keyatt, &countatt);
	ss_add_key_lookup_paths(root, rel, &keyatt, 1, key_clause, relation,
							st->p.geom.nlevels, 2 + st->p.geom.nlevels,
							&lert_methods.path);
}

/*
 * CustomPathMethods.PlanCustomPath: ss_lookup_plan's, custom_private
 * ending with whether the count column is needed.
 */
static Plan *
lert_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
			   List *tlist, List *clauses, List *custom_plans)
{
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	Relation	relation = table_open(rte->relid, NoLock);
	SSColumnClause key;
	CustomScan *cscan;
	bool		count;

	if (!ss_match_keys(root, rel, clauses, PATH_REQ_OUTER(&best_path->path),
					   1, key_clause, relation, &key))
		elog(ERROR, "lert lookup path lost its key clause");
	count = needs_count(rel, relation, clauses);
	table_close(relation, NoLock);
	cscan = ss_lookup_plan(rel, best_path, tlist, clauses, &key, 1,
						   &lert_methods.scan);
	cscan->custom_private = lappend_int(cscan->custom_private, count);
	return &cscan->scan.plan;
}

/*
 * A key found reported, with its count at the report (format 0: once
 * find_reports found the report, has_report).
 */
typedef struct LertFound
{
	Datum		key;
	uint64		fp;
	char	   *bytes;
	uint32		len;
	bool		has_report;
	int64		count;
} LertFound;

typedef struct LertLookupState
{
	SSLookupState ls;
	bool		need_count;
	bool		waited;			/* for a round, once per scan */
	bool		from_reports;	/* format 0: counts from the report stream */
	LertFound  *found;			/* of the current keys, in keycxt */
	int			nfound;
	int			next;
} LertLookupState;

static TupleTableSlot *lert_lookup_next(ScanState *ss);

static Node *
lert_create_state(CustomScan *cscan)
{
	return ss_lookup_create_state(sizeof(LertLookupState), lert_lookup_next,
								  "Keys");
}

static int
found_cmp(const void *a, const void *b)
{
	uint64		x = ((const LertFound *) a)->fp;
	uint64		y = ((const LertFound *) b)->fp;

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * The reports of the keys found, for a lert of format 0: one pass over the
 * report stream, as the scan reads it, until each has its report (the
 * keys sorted by fingerprint, each report's searched for).
 */
static void
find_reports(LertLookupState *ls, Relation rel, LertMeta *meta)
{
	LertReportIter it;
	const LertReportRec *r;
	const char *key;
	int64		id;
	int			left = ls->nfound;

	qsort(ls->found, ls->nfound, sizeof(LertFound), found_cmp);
	if (lert_read_current(rel, meta))
	{
		lert_report_iter_begin(&it, rel, meta, 0);
		while (left > 0 && (r = lert_report_iter_next(&it, &id, &key)) != NULL)
		{
			int			lo = 0,
						hi = ls->nfound;

			/* the first key of fingerprint r->fp or above */
			while (lo < hi)
			{
				int			mid = (lo + hi) / 2;

				if (ls->found[mid].fp < r->fp)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (int i = lo; i < ls->nfound && ls->found[i].fp == r->fp; i++)
			{
				LertFound  *f = &ls->found[i];

				if (f->has_report || f->len != r->keylen ||
					(f->len > 0 && memcmp(f->bytes, key, f->len) != 0))
					continue;
				f->has_report = true;
				f->count = r->count;
				left--;
				break;
			}
		}
		lert_report_iter_end(&it);
	}
}

/*
 * Was the key reported?  *report_count: then its count at the report
 * (format 0: not).  Its entries as lert_lookup reads them, but not the
 * change log: observations not consolidated make no report.  meta, again
 * and area: the caller's buffers (meta is left as last read).
 */
static bool
lookup_report(Relation rel, LertMeta *meta, LertMeta *again, char *area,
			  uint64 fp, const char *key, uint32 keylen, int64 *report_count)
{
	for (int attempt = 0;; attempt++)
	{
		LertDiskCount d = LERT_DISK_COUNT_INIT;
		uint32		cone;
		bool		l0_kept;
		uint64		applied;

		CHECK_FOR_INTERRUPTS();
		if (attempt >= LOOKUP_MAX_RESTARTS)
			ss_page_corrupted(rel, SS_METAPAGE_BLKNO,
							  "LERT levels kept changing under a lookup.");
		if (!lert_read_meta(rel, meta))
			return false;
		cone = lert_cone_of(&meta->params, fp);
		if (!lert_cone_lookup(rel, meta, fp, key, keylen, area, &d, &l0_kept,
							  &applied))
			continue;
		/* a flush of the cone since the metapage was read: read again */
		if (!lert_read_meta(rel, again) ||
			again->cones[cone].flushes != meta->cones[cone].flushes ||
			again->cones[cone].level0_gen != meta->cones[cone].level0_gen)
			continue;
		*report_count = d.first_pos;
		return d.reported;
	}
}

/* Look the keys' values up: the reported ones, with their reports' counts. */
static void
lert_find(LertLookupState *ls, Relation rel)
{
	LertState  *st = lert_get_state(rel);
	AttrNumber	key,
				count;
	Form_pg_attribute att;
	MemoryContext old;
	LertMeta   *meta;
	LertMeta   *again;
	char	   *area;

	ls->need_count = llast_int(((CustomScan *) ls->ls.css.ss.ps.plan)->custom_private);
	lert_columns(rel, &key, &count);
	att = TupleDescAttr(RelationGetDescr(rel), key - 1);
	ss_lookup_key_values(&ls->ls, 0, att, att->attcollation, "a lert lookup");
	if (!ls->waited && !ls->ls.done)
	{
		lert_wait_round(rel);
		ls->waited = true;
	}
	old = MemoryContextSwitchTo(ls->ls.keycxt);
	meta = palloc(sizeof(LertMeta));
	again = palloc(sizeof(LertMeta));
	area = palloc(SS_PAGE_DATA_SIZE);
	ls->found = palloc(sizeof(LertFound) * Max(ls->ls.nvals[0], 1));
	ls->nfound = 0;
	ls->next = 0;
	while (ss_lookup_next_keys(&ls->ls))
	{
		LertFound  *f = &ls->found[ls->nfound];
		bool		free_bytes;

		f->key = ls->ls.keys[0];
		f->fp = lert_key_fingerprint(st, f->key, &f->bytes, &f->len,
									 &free_bytes);
		if (!lookup_report(rel, meta, again, area, f->fp, f->bytes, f->len,
						   &f->count))
			continue;
		f->has_report = false;
		ls->nfound++;
	}
	/* (meta: as the last lookup read it; a format stays until TRUNCATE) */
	ls->from_reports = ls->need_count && ls->nfound > 0 &&
		meta->format < LERT_FORMAT_REPORT_COUNTS;
	if (ls->from_reports)
		find_reports(ls, rel, meta);
	MemoryContextSwitchTo(old);
}

/* ExecScanAccessMtd: the next key found reported */
static TupleTableSlot *
lert_lookup_next(ScanState *ss)
{
	LertLookupState *ls = (LertLookupState *) ss;
	Relation	rel = ss->ss_currentRelation;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	TupleDesc	desc = RelationGetDescr(rel);

	ExecClearTuple(slot);
	if (!ls->ls.ready)
	{
		ls->ls.ready = true;
		lert_find(ls, rel);
	}
	while (ls->next < ls->nfound)
	{
		LertFound  *f = &ls->found[ls->next++];
		AttrNumber	key,
					count;
		Datum	   *values;
		bool	   *nulls;
		MemoryContext old;

		/* (on a standby, a report may lag its key's flag, as in the scan) */
		if (ls->from_reports && !f->has_report)
			continue;
		lert_columns(rel, &key, &count);
		MemoryContextReset(ls->ls.rowcxt);
		old = MemoryContextSwitchTo(ls->ls.rowcxt);
		values = palloc0(sizeof(Datum) * desc->natts);
		nulls = palloc(sizeof(bool) * desc->natts);
		memset(nulls, true, sizeof(bool) * desc->natts);
		values[key - 1] = f->key;
		nulls[key - 1] = false;
		/* a count the query does not read stays NULL */
		if (ls->need_count)
		{
			values[count - 1] = lert_count_datum(TupleDescAttr(desc, count - 1)->atttypid,
												 f->count);
			nulls[count - 1] = false;
		}
		ExecForceStoreHeapTuple(heap_form_tuple(desc, values, nulls), slot,
								false);
		MemoryContextSwitchTo(old);
		return slot;
	}
	return slot;
}

static const SSCustomMethods lert_methods =
	SS_CUSTOM_METHODS("lert lookup", lert_plan_path, lert_create_state);

const SSPathOps lert_path_ops = {
	.add_paths = lert_add_paths,
	.methods = &lert_methods.scan,
};
