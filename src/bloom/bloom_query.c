/*-------------------------------------------------------------------------
 *
 * bloom_query.c
 *	  SQL functions of the bloom_filter access method: bloom_contains,
 *	  bloom_flush, bloom_info and the constructor bloom_create.
 *
 * A Bloom filter cannot delete (clearing a bit could remove other keys),
 * so there is no delete function, and DELETE is refused like on every
 * structure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/relation.h"
#include "bloom.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "ss_parent.h"
#include "ss_queryutil.h"
#include "ss_remote.h"
#include "ss_sqlfunc.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(bloom_contains);
PG_FUNCTION_INFO_V1(bloom_flush);
PG_FUNCTION_INFO_V1(bloom_info);
PG_FUNCTION_INFO_V1(bloom_create);

/* Is the key's h2 in its sub-buffer (committed, not yet applied)? */
static bool
bloom_buffered(Relation rel, const BloomParams *p, SSHash h)
{
	uint32		sb = bloom_subbuf_of(p, h);
	Buffer		buf = ss_read_checked_page(rel, bloom_buffer_blkno(p, sb),
									  SS_PAGE_BLOOM_BUFFER);
	bool		found = false;

	if (BufferIsValid(buf))
	{
		Page		page = BufferGetPage(buf);
		uint32		n = bloom_buf_counts(page)[sb % p->subbufs_per_page];
		const uint64 *e = bloom_buf_entries(page, p, sb);

		if (n > p->subbuf_cap)
			ss_page_corrupted(rel, bloom_buffer_blkno(p, sb),
							  "Sub-buffer %u claims %u entries; its capacity is %u.",
							  sb, n, p->subbuf_cap);

		for (uint32 i = 0; i < n && !found; i++)
			found = e[i] == h.h2;
		UnlockReleaseBuffer(buf);
	}
	return found;
}

/*
 * Membership in the filter's pages.  The sub-buffer is read before the
 * bits, and a flush sets the bits before it empties the sub-buffer, so a
 * key applied to either is found in one or the other.  Localized: one
 * buffer page (hot) and one bit page; plain and elevator: up to k bit
 * pages, stopping at the first zero bit.
 */
static bool
bloom_contains_pages(Relation rel, const BloomParams *p, SSHash h)
{
	if (p->nsubbufs > 0 && bloom_buffered(rel, p, h))
		return true;

	if (p->mode == BLOOM_MODE_LOCALIZED)
	{
		Buffer		buf = ss_read_checked_page(rel, bloom_bits_blkno(p, bloom_local_page(p, h.h1)),
										  SS_PAGE_BLOOM_BITS);
		const uint64 *words;
		bool		all = true;

		if (!BufferIsValid(buf))
			return false;
		words = (const uint64 *) SSPageGetData(BufferGetPage(buf));
		for (uint32 i = 0; i < p->nhashes && all; i++)
			all = bloom_test_bit(words, bloom_local_bit(p, h.h2, i));
		UnlockReleaseBuffer(buf);
		return all;
	}

	for (uint32 i = 0; i < p->nhashes; i++)
	{
		uint64		b = bloom_global_bit(p, h.h2, i);
		Buffer		buf = ss_read_checked_page(rel, bloom_bits_blkno(p, (uint32) (b / BLOOM_PAGE_BITS)),
										  SS_PAGE_BLOOM_BITS);
		bool		set;

		if (!BufferIsValid(buf))
			return false;
		set = bloom_test_bit((const uint64 *) SSPageGetData(BufferGetPage(buf)),
							 (uint32) (b % BLOOM_PAGE_BITS));
		UnlockReleaseBuffer(buf);
		if (!set)
			return false;
	}
	return true;
}

/*
 * A lookup needs only the log records of its own hash: ss_log_scan_parts
 * indexes them by a bucket of the hash.
 */
#define BLOOM_LOG_BUCKETS	65536

static inline uint32
bloom_log_bucket(SSHash h)
{
	return (uint32) (h.h1 % BLOOM_LOG_BUCKETS);
}

static int
bloom_log_parts_of(const SSPendingHeader *hdr, const char *payload,
				   uint32 *parts, void *arg)
{
	SSPendingKey key;

	if (hdr->type != SS_PENDING_KEY || !ss_record_key(hdr, payload, &key))
		return 0;				/* never an insert of any key */
	parts[0] = bloom_log_bucket(key.hash);
	return 1;
}

/*
 * Membership in the committed state: the committed records still in the
 * change log, then the filter's pages.  The log's head is taken before
 * either is read, so a batch consolidated in between is found in the pages
 * or in the log (ss_changelog.h).
 */
static bool
bloom_contains_committed(Relation rel, const BloomParams *p, SSHash h)
{
	uint32		bucket = bloom_log_bucket(h);

	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;
		SSKeyPeek	kp = {h, ~UINT64CONST(0), ~UINT64CONST(0)};

		ss_log_read_begin(rel, &snap, attempt, true);

		/*
		 * The log first: a key inserted lately is found in the index
		 * without reading k bit pages that may not be in shared buffers.
		 * Any record committed before the snapshot is either in the log
		 * range scanned or (consolidated before it) in the pages.
		 */
		if (!ss_log_scan_parts(rel, &snap, 0, bloom_log_parts_of, NULL,
							   &bucket, 1, ss_key_peek_record, &kp))
			continue;
		return kp.inserted || bloom_contains_pages(rel, p, h);
	}
}

/*
 * Membership including this transaction's own pending inserts: a pending
 * insert of the same hash answers true (a TRUNCATE in this transaction
 * hides the committed state).  (SSKeyAnswerFn)
 */
static int64
contains_key(Relation rel, Datum key)
{
	BloomState *st = bloom_get_state(rel);
	SSHash		h = ss_hash_datum(key, st->keylen, st->keybyval, st->p.seed);
	SSPendingIter it;
	SSPendingHeader hdr;
	char	   *payload;
	bool		found = false;
	bool		truncated = false;

	if (ss_pending_has(RelationGetRelid(rel)))
	{
		ss_pending_iter_begin(&it, RelationGetRelid(rel));
		truncated = it.start > 0;
		ss_pending_iter_end(&it);
	}
	if (!truncated && bloom_contains_committed(rel, &st->p, h))
		return true;
	if (!ss_pending_has(RelationGetRelid(rel)))
		return false;

	ss_pending_iter_begin(&it, RelationGetRelid(rel));
	while (!found && ss_pending_iter_next(&it, &hdr, &payload))
	{
		SSPendingKey pending;

		if (hdr.type != SS_PENDING_KEY)
			continue;
		memcpy(&pending, payload, sizeof(pending));
		found = pending.hash.h1 == h.h1 && pending.hash.h2 == h.h2;
	}
	ss_pending_iter_end(&it);
	return found;
}

/*
 * On a partitioned table: the answer of the partition that holds the key,
 * or the OR of every partition's (ss_parent.h).
 */
Datum
bloom_contains(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(ss_sql_key_answer(fcinfo, &bloom_structure,
									 "bloom_contains()", contains_key,
									 true) != 0);
}

Datum
bloom_flush(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(ss_sql_flush(fcinfo, "bloom_flush()",
								 &bloom_structure, bloom_flush_all, true));
}

/* the rows and the records (each an insert to buffer) of the change log */
typedef struct BloomLogged
{
	int64		rows;
	int64		inserts;
} BloomLogged;

static void
bloom_count_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
				   void *arg)
{
	BloomLogged *logged = arg;

	if (hdr->type == SS_PENDING_KEY)
	{
		logged->rows += hdr->rows;
		logged->inserts++;
	}
}

static void
bloom_info_fill(Relation rel, Datum *values, bool *nulls)
{
	BloomParams *p = &bloom_get_state(rel)->p;
	BloomMetaData meta;
	int64		buffered = 0;
	BloomLogged logged;
	BlockNumber nblocks;
	double		m;
	double		k;

	/* committed inserts not consolidated yet count too */
	if (!ss_log_scan_all(rel, bloom_count_record, &logged, sizeof(logged), &meta))
		memset(&meta, 0, sizeof(meta));
	else
	{
		meta.items += logged.rows;
		buffered = logged.inserts;
	}
	nblocks = RelationGetNumberOfBlocks(rel);

	buffered += ss_subbufs_total(rel, 1 + p->npages, p->nbufpages,
								 SS_PAGE_BLOOM_BUFFER, p->subbufs_per_page,
								 p->subbuf_cap);

	m = (double) p->nbits;
	k = (double) p->nhashes;
	values[0] = CStringGetTextDatum(bloom_mode_name(p->mode));
	values[1] = Int64GetDatum(p->capacity);
	values[2] = Float8GetDatum(p->fp_rate);
	values[3] = Int64GetDatum((int64) p->nbits);
	values[4] = Int32GetDatum((int32) p->nhashes);
	values[5] = Int32GetDatum((int32) p->npages);
	values[6] = Int32GetDatum((int32) p->nbufpages);
	values[7] = Int32GetDatum((int32) p->subbuf_cap);
	values[8] = Int64GetDatum(buffered);
	values[9] = Int64GetDatum(meta.items);
	values[10] = Int64GetDatum(meta.bits_set);
	values[11] = Float8GetDatum((double) meta.bits_set / m);
	/* (1 - e^{-kn/m})^k for the n items inserted so far */
	values[12] = Float8GetDatum(pow(1.0 - exp(-k * (double) meta.items / m), k));
	values[13] = Int64GetDatum(meta.flushes);
	values[14] = Int64GetDatum((int64) nblocks);
	values[15] = Int64GetDatum((int64) p->seed);
}

/*
 * On a partitioned table, the partitions' rows merged: the parameters
 * they share (NULL where they differ), sizes and counters summed, the
 * fullest partition's fill ratio, and the false-positive rate of an OR of
 * the partitions' answers.
 */
Datum
bloom_info(PG_FUNCTION_ARGS)
{
	return ss_sql_info(fcinfo, &bloom_structure, "bloom_info", "=+=+=++=+++>|++=",
					   bloom_info_fill);
}

/*
 * bloom_create(name, key_type, capacity, fp_rate, mode, buffer_size,
 *				unlogged) returns regclass
 *
 * Creates the table with explicit parameters; NULL arguments take the GUC
 * defaults.  The metapage is created lazily from the catalog row, so the
 * row written here (after CREATE TABLE recorded the defaults) wins.
 */
Datum
bloom_create(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(ss_sql_create_keyed(fcinfo, &bloom_structure, 6));
}
