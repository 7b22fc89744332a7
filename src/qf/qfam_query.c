/*-------------------------------------------------------------------------
 *
 * qfam_query.c
 *	  SQL functions of the quotient filter family: qf_contains, qf_count,
 *	  qf_delete, qf_merge, qf_resize, qf_info and the constructor qf_create.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "qfam.h"
#include "qfilter.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "ss_progress.h"
#include "ss_parent.h"
#include "ss_queryutil.h"
#include "ss_remote.h"
#include "ss_sqlfunc.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(qf_count_sql);
PG_FUNCTION_INFO_V1(qf_contains_sql);
PG_FUNCTION_INFO_V1(qf_delete_sql);
PG_FUNCTION_INFO_V1(qf_merge_sql);
PG_FUNCTION_INFO_V1(qf_merge_value_sql);
PG_FUNCTION_INFO_V1(qf_resize_sql);
PG_FUNCTION_INFO_V1(qf_info_sql);
PG_FUNCTION_INFO_V1(qf_flush_sql);
PG_FUNCTION_INFO_V1(qf_create_sql);

/* Hash the key argument argno after converting it to the key type. */
static SSHash
qfam_key_hash(FunctionCallInfo fcinfo, int argno, const QfamState *st)
{
	return ss_sql_key_hash(fcinfo, argno, st->keytype, st->keylen,
						   st->keybyval, st->p.seed);
}

static inline uint64
add_saturating(uint64 a, uint64 b)
{
	return (a + b < a) ? PG_UINT64_MAX : a + b;
}

/*
 * The fingerprint space of a filter (qf.h): change records are compared by
 * their fingerprint, y.
 */
typedef struct QfamSpace
{
	uint64		mult;
	int			exp;
} QfamSpace;

static inline uint64
qfam_fp(const QfamSpace *sp, uint64 h1)
{
	return qf_space_y(h1, sp->mult, sp->exp);
}

/*
 * The key of a change record of fingerprint fp (qfam_fp) that adds or
 * removes copies, or false: what a lookup of that fingerprint reads from
 * the log.
 */
static bool
qfam_fp_record(const SSPendingHeader *hdr, const char *payload,
			   const QfamSpace *sp, uint64 fp, SSPendingKey *key)
{
	return ss_record_key(hdr, payload, key) &&
		qfam_fp(sp, key->hash.h1) == fp && key->weight > 0;
}

/*
 * Replaying the committed records still in the change log on one key's
 * counts (qfam_committed_count): the same steps consolidation takes
 * (qfam_consolidate.c), on the levels' counts read with their pages' applied_pos.
 */
typedef struct KeyReplay
{
	uint64		fp;				/* the key's fingerprint (qfam_fp) */
	QfamSpace	sp;
	uint32		nlevels;
	QfamPageRead lv[QFAM_MAX_LEVELS];
	bool		saw_delete;		/* a delete of the key is in the log */
} KeyReplay;

static void
qfam_replay_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
				   void *arg)
{
	KeyReplay  *kr = arg;
	SSPendingKey key;
	uint64		n;

	if (!qfam_fp_record(hdr, payload, &kr->sp, kr->fp, &key))
		return;
	if (hdr->type == SS_PENDING_DELETE)
		kr->saw_delete = true;
	/* level 0 has applied it, and then so has every older level */
	if (pos < kr->lv[0].applied)
		return;
	n = (uint64) key.weight;
	if (hdr->type == SS_PENDING_KEY)
		kr->lv[0].count = add_saturating(kr->lv[0].count, n);
	else if (hdr->type == SS_PENDING_DELETE)
	{
		uint64		owed = n - Min(kr->lv[0].count, n);

		kr->lv[0].count -= Min(kr->lv[0].count, n);
		for (uint32 l = 1; l < kr->nlevels && owed > 0; l++)
		{
			if (kr->lv[l].applied > pos)
			{
				/* applied there already: the page says how much */
				owed -= Min(owed, kr->lv[l].last_removed);
				continue;
			}
			n = Min(kr->lv[l].count, owed);
			kr->lv[l].count -= n;
			owed -= n;
		}
	}
}

/*
 * A lookup replays only the log records of its own fingerprint:
 * ss_log_scan_parts indexes them by the fingerprint's top 16 bits (of
 * the bits y < M takes).
 */
static inline uint32
qfam_log_bucket(uint64 h1, const QfamSpace *sp)
{
	int			ybits = qfam_space_bits(sp->mult, sp->exp);

	return (uint32) (qfam_fp(sp, h1) >> Max(ybits - 16, 0));
}

static int
qfam_log_parts_of(const SSPendingHeader *hdr, const char *payload,
				  uint32 *parts, void *arg)
{
	SSPendingKey key;

	if (!ss_record_key(hdr, payload, &key))
		return 0;				/* replayed by no lookup */
	parts[0] = qfam_log_bucket(key.hash.h1, (const QfamSpace *) arg);
	return 1;
}

/*
 * Whether the log holds a record adding copies of a fingerprint, or one
 * removing copies (as ss_key_peek_record, by fingerprint).
 */
typedef struct QfamKeyPeek
{
	QfamSpace	sp;
	uint64		fp;
	bool		inserted;
	bool		deleted;
} QfamKeyPeek;

static void
qfam_key_peek_record(uint64 pos, const SSPendingHeader *hdr,
					 const char *payload, void *arg)
{
	QfamKeyPeek *kp = arg;
	SSPendingKey key;

	if (!qfam_fp_record(hdr, payload, &kp->sp, kp->fp, &key))
		return;
	if (hdr->type == SS_PENDING_KEY)
		kp->inserted = true;
	else if (hdr->type == SS_PENDING_DELETE)
		kp->deleted = true;
}

/*
 * The committed count of h's fingerprint: summed over the levels, with the
 * committed records still in the change log replayed on it.  With
 * any_copy, stop at the first level that has the fingerprint (a membership
 * test) unless the log holds a delete of it: level 0 first (its pages are
 * hot), then from the largest level down, since the largest holds most
 * keys, so a present key costs one page read in most cases and an absent
 * one a read per on-disk level.
 */
static uint64
qfam_committed_count(Relation rel, SSHash h, bool any_copy)
{
	QfamMeta	meta;
	KeyReplay	kr;
	uint64		count = 0;
	QfamSpace	sp;
	bool		read_all = false;

	qfam_space(&qfam_get_state(rel)->p, &sp.mult, &sp.exp);

	/*
	 * Readers take no heavyweight lock.  A run of blocks is only rewritten
	 * by a merge after another merge has installed a new layout, or by the
	 * merge in place the metapage records, whose target pages read the same
	 * before and after their rewrite (qfam_reads_resolve); so if the levels
	 * have not moved between the two reads of the metapage
	 * (qfam_levels_moved), every page we read is of the levels we took;
	 * otherwise, or if the log moved (ss_changelog.h), look again.
	 */
	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;
		QfamMeta	before;
		bool		stopped_early = false;
		uint32		bucket;

		/* the levels and the log snapshot from one read of the metapage */
		if (!qfam_read_meta(rel, &meta))
			return 0;
		if (ss_log_read_begin_meta(rel, &meta.hdr, &snap, attempt, true))
		{
			/* consolidated: the levels moved */
			if (!qfam_read_meta(rel, &meta))
				return 0;
			ss_log_snapshot_of(rel, &meta.hdr, &snap);
		}
		if (any_copy && snap.head_pos != snap.end_pos)
		{
			/*
			 * A committed insert of the fingerprint in the log, and no
			 * delete of it there, means a copy whatever the levels hold
			 * (an insert the levels applied is in them), so a key inserted
			 * lately is found without reading every level.
			 */
			QfamKeyPeek kp = {sp, qfam_fp(&sp, h.h1), false, false};

			bucket = qfam_log_bucket(h.h1, &sp);
			if (!ss_log_scan_parts(rel, &snap, 0, qfam_log_parts_of, &sp,
								   &bucket, 1, qfam_key_peek_record, &kp))
				continue;
			if (kp.inserted && !kp.deleted)
				return 1;
		}
		before = meta;
		memset(&kr, 0, sizeof(kr));
		kr.sp = sp;
		kr.fp = qfam_fp(&sp, h.h1);
		kr.nlevels = meta.nlevels;
		qfam_level_read(rel, &meta, 0, h.h1, &kr.lv[0]);
		count = kr.lv[0].count;
		for (uint32 l = meta.nlevels - 1; l > 0; l--)
		{
			if (any_copy && count > 0)
			{
				/* levels not read count 0 and have applied nothing */
				stopped_early = true;
				break;
			}

			/*
			 * An empty older level (merged away) has nothing to count; only
			 * a delete in flight could have left a mark on its page, and a
			 * delete of the key in the log makes us read everything.
			 */
			if (!read_all && meta.levels[l].items == 0 && meta.levels[l].total == 0)
			{
				stopped_early = true;
				continue;
			}
			qfam_level_read(rel, &meta, l, h.h1, &kr.lv[l]);
			count = add_saturating(count, kr.lv[l].count);
		}
		qfam_reads_resolve(&meta, kr.lv, kr.nlevels);
		if (!qfam_read_meta(rel, &meta) || qfam_levels_moved(&before, &meta))
			continue;
		/* no merge moved the levels: a stale page of one is damage */
		for (uint32 l = 0; l < kr.nlevels; l++)
			if (kr.lv[l].stale_blk != InvalidBlockNumber &&
				kr.lv[l].stale_blk != SS_METAPAGE_BLKNO)	/* not read */
				ss_page_corrupted(rel, kr.lv[l].stale_blk,
								  "The page is not of the generation (epoch %u) of level %u, which holds items, or is ahead of it.",
								  meta.levels[l].epoch, l);
		bucket = qfam_log_bucket(h.h1, &sp);
		if (!ss_log_scan_parts(rel, &snap, 0, qfam_log_parts_of, &sp,
							   &bucket, 1, qfam_replay_record, &kr))
			continue;
		/* a delete in the log may need the levels not read */
		if (stopped_early && kr.saw_delete)
		{
			any_copy = false;
			read_all = true;
			continue;
		}
		break;
	}
	count = 0;
	for (uint32 l = 0; l < kr.nlevels; l++)
		count = add_saturating(count, kr.lv[l].count);
	return count;
}

/*
 * The count seen by this transaction: the committed count, then its own
 * pending inserts and deletes of the same fingerprint replayed in order.
 */
static uint64
qfam_count_hash(Relation rel, const QfamState *st, SSHash h)
{
	uint64		count = qfam_committed_count(rel, h, false);

	if (ss_pending_has(RelationGetRelid(rel)))
	{
		SSPendingIter it;
		SSPendingHeader hdr;
		char	   *payload;
		QfamSpace	sp;

		qfam_space(&st->p, &sp.mult, &sp.exp);
		ss_pending_iter_begin(&it, RelationGetRelid(rel));
		if (it.start > 0)
			count = 0;			/* truncated in this transaction */
		while (ss_pending_iter_next(&it, &hdr, &payload))
		{
			SSPendingKey key;

			memcpy(&key, payload, sizeof(key));
			/* the filter stores fingerprints, so compare those */
			if (qfam_fp(&sp, key.hash.h1) != qfam_fp(&sp, h.h1))
				continue;
			if (hdr.type == SS_PENDING_KEY)
				count = add_saturating(count, (uint64) key.weight);
			else if (hdr.type == SS_PENDING_DELETE)
				count -= Min(count, (uint64) key.weight);
		}
		ss_pending_iter_end(&it);
	}
	return count;
}

/*
 * qf_count(filter, key): the count of the key argument's fingerprint, on a
 * partitioned table the partitions' counts added.  With pending changes of
 * this transaction the whole count is read, since a pending delete may
 * cancel a copy.  (SSKeyAnswerFn)
 */
static int64
count_key(Relation rel, Datum key)
{
	QfamState  *st = qfam_get_state(rel);
	uint64		count = qfam_count_hash(rel, st, ss_hash_datum(key, st->keylen,
																st->keybyval,
																st->p.seed));

	return (int64) Min(count, (uint64) PG_INT64_MAX);
}

/*
 * qf_contains(filter, key): whether the fingerprint is there; without
 * pending changes, the first copy found answers.  (SSKeyAnswerFn)
 */
static int64
contains_key(Relation rel, Datum key)
{
	QfamState  *st;

	if (ss_pending_has(RelationGetRelid(rel)))
		return count_key(rel, key) > 0;
	st = qfam_get_state(rel);
	return qfam_committed_count(rel, ss_hash_datum(key, st->keylen,
												   st->keybyval, st->p.seed),
								true) > 0;
}

Datum
qf_count_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(ss_sql_key_answer(fcinfo, &qfam_structure, "qf_count()",
									  count_key, false));
}

Datum
qf_contains_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(ss_sql_key_answer(fcinfo, &qfam_structure,
									 "qf_contains()", contains_key,
									 true) != 0);
}

/*
 * qf_delete(filter, key, count DEFAULT 1): remove count copies of the key's
 * fingerprint at commit (all of them if it has fewer).  Deleting a key that
 * was never inserted may remove a colliding key's fingerprint, as in every
 * quotient filter; never delete what you did not insert.  On a table
 * partitioned by the key, in the partition that holds it.
 */
Datum
qf_delete_sql(PG_FUNCTION_ARGS)
{
	Datum		keyd;
	Relation	rel = ss_open_routed_target(fcinfo, 1, &qfam_structure,
											RowExclusiveLock, "qf_delete()",
											ACL_DELETE, &keyd);
	QfamState  *st;
	SSPendingKey key;

	if (rel == NULL)
		PG_RETURN_VOID();		/* no partition holds the key */
	st = qfam_get_state(rel);
	/* STRICT: a NULL key or count deletes nothing (it must not hash a 0) */
	key.weight = PG_GETARG_INT64(2);
	if (key.weight < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("cannot delete a negative number of copies")));
	key.hash = qfam_key_hash(fcinfo, 1, st);
	if (key.weight > 0)
		ss_pending_add(rel, SS_PENDING_DELETE, &key, sizeof(key));
	relation_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * A merge's fingerprints cannot be routed to partitions: the partition key
 * is the key's value, which a fingerprint no longer has.
 */
static void
refuse_merge_parent(Oid relid, const char *fname)
{
	ss_refuse_parent(relid, fname,
					 "A filter's fingerprints cannot be routed to the partitions that hold their keys.",
					 "Merge partition by partition, each into or from the partition of the same bounds.");
}

/*
 * qf_merge(target, source): add every fingerprint of source (with its
 * count) to target, at commit like inserts.  Both must have the same
 * fingerprint size, seed and key type; the fingerprints are re-split for
 * the target's geometry, nothing is rehashed.
 */
Datum
qf_merge_sql(PG_FUNCTION_ARGS)
{
	Relation	dst;
	Relation	src;
	QfamState  *dst_st;
	QfamState  *src_st;
	QfamMeta	meta;
	int64		merged = 0;
	QfamSpace	dst_sp;
	QfamSpace	src_sp;

	refuse_merge_parent(PG_GETARG_OID(0), "qf_merge()");
	refuse_merge_parent(PG_GETARG_OID(1), "qf_merge()");
	dst = ss_sql_open_structure(PG_GETARG_OID(0), RowExclusiveLock,
											  "qf_merge()", ACL_INSERT,
											  &qfam_structure);
	src = ss_sql_open_structure(PG_GETARG_OID(1), AccessShareLock, NULL,
								ACL_SELECT, &qfam_structure);

	/* the source's keys would become readable in the target */
	ss_sql_check_row_security(src, "qf_merge()");
	dst_st = qfam_get_state(dst);
	src_st = qfam_get_state(src);
	if (RelationGetRelid(dst) == RelationGetRelid(src))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot merge quotient filter \"%s\" into itself",
						RelationGetRelationName(dst))));
	qfam_space(&dst_st->p, &dst_sp.mult, &dst_sp.exp);
	qfam_space(&src_st->p, &src_sp.mult, &src_sp.exp);
	if (qfam_space_bits(dst_sp.mult, dst_sp.exp) != qfam_space_bits(src_sp.mult, src_sp.exp) ||
		dst_st->p.seed != src_st->p.seed)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot merge quotient filters with different fingerprints"),
				 errdetail("\"%s\" has %d-bit fingerprints with seed %u, \"%s\" has %d-bit fingerprints with seed %u.",
						   RelationGetRelationName(dst), qfam_space_bits(dst_sp.mult, dst_sp.exp),
						   dst_st->p.seed, RelationGetRelationName(src),
						   qfam_space_bits(src_sp.mult, src_sp.exp), src_st->p.seed),
				 errhint("Create both filters with the same capacity and false-positive rate.")));
	if (dst_sp.mult != src_sp.mult || dst_sp.exp != src_sp.exp)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot merge quotient filters with different fingerprints"),
				 errdetail("\"%s\" has fingerprints below " UINT64_FORMAT " * 2^%d, \"%s\" below " UINT64_FORMAT " * 2^%d.",
						   RelationGetRelationName(dst), dst_sp.mult, dst_sp.exp,
						   RelationGetRelationName(src), src_sp.mult, src_sp.exp),
				 errhint("Create both filters with the same capacity and false-positive rate.")));
	if (dst_st->keytype != src_st->keytype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot merge quotient filters with different key types"),
				 errdetail("\"%s\" has %s keys, \"%s\" has %s keys.",
						   RelationGetRelationName(dst), format_type_be(dst_st->keytype),
						   RelationGetRelationName(src), format_type_be(src_st->keytype))));

	/*
	 * The source's committed changes still in its change log are moved
	 * into its levels first (waiting for a round in progress), so that
	 * every change committed before a still-committing one is merged; then
	 * no merge may rewrite the source's levels while we read them.
	 */
	(void) ss_log_consolidate(src, true);
	LockPage(src, SS_METAPAGE_BLKNO, ShareLock);
	if (qfam_read_meta(src, &meta))
	{
		QfamMergeView view;

		/* a merge in place that a crash stopped: each copy once */
		qfam_merge_view(src, &meta, &view);
		for (uint32 l = 0; l < meta.nlevels; l++)
		{
			QfamCursor	c;

			qfam_cursor_init(&c, src, &meta, l, &view,
							 qfam_level_read_ring(meta.params.kind, l));
			while (c.valid)
			{
				SSPendingKey key;

				CHECK_FOR_INTERRUPTS();
				/* a hash of the fingerprint is all a filter needs */
				key.hash.h1 = c.fp;
				key.hash.h2 = 0;
				key.weight = (int64) Min(c.count, (uint64) PG_INT64_MAX);
				ss_pending_add(dst, SS_PENDING_KEY,
							   &key, sizeof(key));
				merged++;
				qfam_cursor_next(&c);
			}
			qfam_cursor_end(&c);
		}
	}
	UnlockPage(src, SS_METAPAGE_BLKNO, ShareLock);
	relation_close(src, AccessShareLock);
	relation_close(dst, NoLock);
	PG_RETURN_INT64(merged);
}

/*
 * qf_merge_value(filter, value qfilter): add every fingerprint of an
 * in-memory qfilter (with its count) to the table at commit.  A qfilter
 * built with the table's capacity and fp_rate has the table's fingerprint
 * space (qf_sized_base; for tables of the earlier layouts and qfilters of
 * versions 1 and 2, 2^fp_bits); its fingerprints are the table's, passed
 * as the smallest hash of each (qf_space_hash), nothing is rehashed.
 *
 * Spaces that differ (a sized qfilter into a table of the earlier layouts,
 * a qfilter of version 1 or 2 into a sized table, other capacities): the
 * hashes of one qfilter fingerprint meet one or more table fingerprints,
 * and each of them is added with its count, so that no key of the qfilter
 * is missed; the extra ones are false positives, about as many as the
 * qfilter's own (n / M of the qfilter's space).  A table of more
 * fingerprint bits than the qfilter is refused: most of its fingerprints'
 * bits would be guesses.  The return value counts the qfilter's
 * fingerprints.
 */
Datum
qf_merge_value_sql(PG_FUNCTION_ARGS)
{
	Relation	rel;
	QFilterData *qf;
	QfamState  *st;
	QfGeom		g;
	int64		merged = 0;
	QfamSpace	sp;

	refuse_merge_parent(PG_GETARG_OID(0), "qf_merge_value()");
	rel = ss_sql_open_structure(PG_GETARG_OID(0), RowExclusiveLock,
								"qf_merge_value()", ACL_INSERT,
								&qfam_structure);
	qf = PG_GETARG_QFILTER_P(1);
	qfilter_check(qf);
	st = qfam_get_state(rel);
	qfam_space(&st->p, &sp.mult, &sp.exp);
	if (qfam_space_bits(sp.mult, sp.exp) > qfilter_fp_bits(qf) ||
		qf->seed != st->p.seed)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot merge a qfilter into quotient filter \"%s\" with different fingerprints",
						RelationGetRelationName(rel)),
				 errdetail("The table has %d-bit fingerprints with seed %u, the qfilter %d-bit fingerprints with seed %u.",
						   qfam_space_bits(sp.mult, sp.exp), st->p.seed,
						   qfilter_fp_bits(qf), qf->seed),
				 errhint("Build the qfilter with the table's capacity and false-positive rate.")));
	ss_check_merge_key_type(qf->elemtype, "qfilter", rel, "quotient filter",
							st->keytype);
	qfilter_geom(qf, &g);
	for (uint32 pg = 0; pg < qfilter_npages(qf); pg++)
	{
		QfIter		it;
		uint32		q;
		uint64		r;
		uint64		c;

		CHECK_FOR_INTERRUPTS();
		qf_iter_init(&it, &g, qfilter_area(qf, pg));
		while (qf_iter_next(&it, &q, &r, &c))
		{
			SSPendingKey key;
			uint64		y = qf_space_join(pg, q, r, qf->rbits, qf->nhome);
			uint64		first;
			uint64		last;

			/*
			 * The qfilter fingerprint's hashes [first, last]: last is one
			 * below the next fingerprint's first (that of y = M wraps to 0,
			 * so the last fingerprint's last is PG_UINT64_MAX).
			 */
			first = qf_space_y(qf_space_hash(y, qf->space_mult, qf->space_exp),
							   sp.mult, sp.exp);
			last = qf_space_y(qf_space_hash(y + 1, qf->space_mult,
											qf->space_exp) - 1,
							  sp.mult, sp.exp);
			key.hash.h2 = 0;
			key.weight = (int64) Min(c, (uint64) PG_INT64_MAX);
			/* at most three: the table's space is below twice the qfilter's */
			for (uint64 ty = first;; ty++)
			{
				key.hash.h1 = qf_space_hash(ty, sp.mult, sp.exp);
				ss_pending_add(rel, SS_PENDING_KEY, &key, sizeof(key));
				if (ty == last)
					break;
			}
			merged++;
		}
	}
	relation_close(rel, NoLock);
	PG_RETURN_INT64(merged);
}

/*
 * qf_resize(filter): double the filter now, without rehashing (one
 * remainder bit becomes a page bit): a quotient_filter's level, or the
 * largest level of a buffered or cascade filter, into which every level is
 * merged.  Not transactional: it changes the layout, not the contents, and
 * stays done if the transaction aborts.  Returns the new number of pages.
 */
static int64
qfam_resize(Relation rel)
{
	QfamMeta	meta;
	uint32		last;
	uint32		t;
	int64		pages = 0;

	/* checks the parameters (the metapage exists from creation on) */
	(void) qfam_get_state(rel);
	ss_progress_start(rel, "qf_resize");
	/* no consolidation round may write the levels meanwhile */
	ss_log_lock_consolidation(rel);
	LockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	if (!qfam_read_meta(rel, &meta))
		elog(ERROR, "quotient filter metapage disappeared");
	(void) qfam_finish_merge(rel, &meta);
	last = meta.nlevels - 1;
	t = meta.levels[last].t + 1;
	while (!qfam_merge_levels(rel, &meta, meta.nlevels, last, t))
		t++;
	UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	UnlockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock);
	ss_progress_end();
	for (uint32 l = 0; l < meta.nlevels; l++)
	{
		QfamMap		map;

		qfam_level_map(&meta.params, &meta.levels[l], &map);
		pages += (int64) map.npages;
	}
	return pages;
}

/* On a partitioned table: every leaf partition, their pages summed. */
Datum
qf_resize_sql(PG_FUNCTION_ARGS)
{
	/* ownership, as ALTER TABLE needs, rather than a privilege */
	List	   *rels = ss_open_all_targets(PG_GETARG_OID(0), &qfam_structure,
										   ShareUpdateExclusiveLock,
										   "qf_resize()", SS_ACL_OWNER, NULL);
	ListCell   *lc;
	int64		pages = 0;

	/* with an xid, the commit waits for the resize's WAL to be flushed */
	(void) GetCurrentTransactionId();
	foreach(lc, rels)
		pages += qfam_resize((Relation) lfirst(lc));
	ss_close_all_targets(rels, NoLock);
	PG_RETURN_INT64(pages);
}

/* ss_log_flush's flush: the levels hold every committed change; their items */
static int64
qfam_flushed_items(Relation rel, void *stats)
{
	QfamMeta	meta;
	int64		items = 0;

	if (qfam_read_meta(rel, &meta))
		for (uint32 l = 0; l < meta.nlevels; l++)
			items += meta.levels[l].items;
	return items;
}

/*
 * qf_flush(regclass) returns bigint: consolidate every committed change
 * into the levels now (what a background round or VACUUM does); returns
 * the filter's items.
 */
Datum
qf_flush_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(ss_sql_flush(fcinfo, "qf_flush()",
								 &qfam_structure, qfam_flushed_items, true));
}

static void
qf_info_fill(Relation rel, Datum *values, bool *nulls)
{
	QfamState  *st = qfam_get_state(rel);
	QfamMeta	meta;
	int64		pages = 0;
	int64		items = 0;
	int64		total = 0;
	double		slots = 0;
	double		fpr = 0;
	QfamMap		lastmap;
	uint32		lastnhome;

	/*
	 * The levels as consolidated: their counters cannot include the log's
	 * records without applying them (whether an insert adds an item, or a
	 * delete removes a copy, depends on the levels), which is the work an
	 * info call must not do; pending_records says what waits.
	 */
	if (!qfam_read_meta(rel, &meta))
		qfam_first_level(&st->p, &meta);
	for (uint32 l = 0; l < meta.nlevels; l++)
	{
		QfamLevel  *lv = &meta.levels[l];
		QfamMap		map;
		double		lslots;

		qfam_level_map(&st->p, lv, &map);
		lslots = qfam_map_slots(&map);
		pages += (int64) map.npages;
		items += lv->items;
		total = qfam_counter_add(total, lv->total);
		slots += lslots;
		/* a level at load alpha answers yes for an absent key w.p. ~alpha 2^-r */
		fpr += ((double) lv->items / lslots) * ldexp(1.0, -(int) lv->rbits);
	}
	values[0] = CStringGetTextDatum(ss_structure_name(rel));
	values[1] = Int64GetDatum(st->p.capacity);
	values[2] = Float8GetDatum(st->p.fp_rate);
	/* bits of the fingerprints y < M; log2 of a page's home slots, down */
	qfam_level_map(&st->p, &meta.levels[meta.nlevels - 1], &lastmap);
	values[3] = Int32GetDatum(lastmap.exp + (lastmap.mult > 1 ?
											 pg_leftmost_one_pos64(lastmap.mult) + 1 : 0));
	values[4] = Int32GetDatum((int32) meta.levels[meta.nlevels - 1].rbits);
	/*
	 * A buffered or cascade filter of layout 3 has the capacity's level's
	 * pages from its creation on: smaller levels' pages hold fewer home
	 * slots, the largest level has those until it grows.
	 */
	lastnhome = lastmap.nhome;
	if (st->p.layout == QFAM_LAYOUT_SIZED &&
		meta.levels[meta.nlevels - 1].t < st->p.t_max)
	{
		uint64		cap_pages;

		qfam_sized_level(&st->p, st->p.t_max, &cap_pages, &lastnhome);
	}
	values[5] = Int32GetDatum(pg_leftmost_one_pos32(lastnhome));
	values[6] = Int32GetDatum((int32) meta.nlevels);
	values[7] = Int64GetDatum(pages);
	values[8] = Int64GetDatum(items);
	values[9] = Int64GetDatum(total);
	values[10] = Float8GetDatum(slots > 0 ? (double) items / slots : 0);
	values[11] = Float8GetDatum(fpr);
	values[12] = Int64GetDatum((int64) RelationGetNumberOfBlocks(rel));
	values[13] = Int64GetDatum(meta.merges);
	values[14] = Int64GetDatum((int64) st->p.seed);
}

/*
 * On a partitioned table, the partitions' rows merged: the parameters
 * they share (NULL where they differ), sizes and counters summed, the
 * largest number of levels and load factor, and the false-positive rate
 * of an OR of the partitions' answers.
 */
Datum
qf_info_sql(PG_FUNCTION_ARGS)
{
	return ss_sql_info(fcinfo, &qfam_structure, "qf_info", "=+====>+++>|++=",
					   qf_info_fill);
}

/*
 * qf_create's buffer_size, in kB like its setting (streamsketch.
 * qf_buffer_size) but kept in pages: the parameter table has no unit
 * conversion, so the argument is read and range-checked (in kB, with the
 * setting's messages) as this one-parameter table's, then turned into
 * pages.
 */
static const SSParam qfam_buffer_arg_params[] = {
	{.name = "buffer_pages", .type = SS_PARAM_INT,
		SS_FIELD(QfamState, p.buffer_pages),
		.min = BLCKSZ / 1024, .max = QFAM_BUFFER_KB_MAX,
	.setting_flags = GUC_UNIT_KB},
};

static const SSStructure qfam_buffer_arg = {
	.name = "quotient filter",
	.params = qfam_buffer_arg_params,
	.nparams = lengthof(qfam_buffer_arg_params),
};

/*
 * qf_create(name, key_type, capacity, fp_rate, counted, unlogged)
 * returns regclass: creates the table with explicit parameters (NULL means
 * the GUC default).
 */
Datum
qf_create_sql(PG_FUNCTION_ARGS)
{
	QfamState	st;
	Oid			relid;
	bool		counted = PG_ARGISNULL(4) ? false : PG_GETARG_BOOL(4);
	bool		unlogged = PG_ARGISNULL(5) ? false : PG_GETARG_BOOL(5);
	const char *amname = PG_ARGISNULL(6) ? "quotient_filter" :
		text_to_cstring(PG_GETARG_TEXT_PP(6));

	ss_sql_create_check(fcinfo, "qf_create");
	memset(&st, 0, sizeof(st));
	if (strcmp(amname, "quotient_filter") == 0)
		st.p.kind = QFAM_KIND_QF;
	else if (strcmp(amname, "buffered_quotient_filter") == 0)
		st.p.kind = QFAM_KIND_BQF;
	else if (strcmp(amname, "cascade_filter") == 0)
		st.p.kind = QFAM_KIND_CF;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a quotient filter access method", amname),
				 errhint("Use quotient_filter, buffered_quotient_filter or cascade_filter.")));
	/* no relation yet: qfam_check_params keeps the kind set above */
	ss_params_from_settings(&qfam_structure, NULL, &st);
	ss_param_from_arg(&qfam_structure, "capacity", fcinfo, 2, &st);
	ss_param_from_arg(&qfam_structure, "fp_rate", fcinfo, 3, &st);
	if (ss_param_from_arg(&qfam_structure, "fanout", fcinfo, 7, &st) &&
		st.p.kind != QFAM_KIND_CF && (int32) st.p.fanout < 0)
		st.p.fanout = 0;		/* unused but by a cascade filter: as before */
	if (ss_param_from_arg(&qfam_buffer_arg, "buffer_pages", fcinfo, 8, &st))
		st.p.buffer_pages /= BLCKSZ / 1024;
	ss_params_check(&qfam_structure, NULL, &st, SS_PARAMS_CONSTRUCTOR);

	relid = ss_create_structure(&qfam_structure, &st, PG_GETARG_TEXT_PP(0),
								PG_GETARG_OID(1), counted ? "count" : NULL,
								amname, unlogged);
	PG_RETURN_OID(relid);
}
