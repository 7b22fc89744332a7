/*-------------------------------------------------------------------------
 *
 * ss_pending.c
 *	  The log of a transaction's pending changes (see ss_pending.h).
 *
 * The log is a byte sequence of MAXALIGNed records (a PendingSeq): the
 * first spill_len bytes are in a temporary file, the rest (mem_used bytes)
 * in memory.  Records never straddle the two parts, because the memory part
 * is written out whole and an oversized record goes straight to the file.
 *
 * At pre-commit, a structure that opts in (SSStructure.combine_keys) gets
 * its key records combined per hash before they are appended (see
 * pending_combine): the batch then holds one record per distinct key
 * between two other records, in a second sequence of the same kind.  A
 * structure with records of its own to combine (SSStructure.combine_batch,
 * a cbt) writes that sequence itself.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "common/int.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "port/pg_bitutils.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "ss_structure.h"
#include "ss_test.h"
#include "ss_worker.h"
#include "ss_xlog.h"
#include "storage/buffile.h"
#include "streamsketch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

typedef struct PendingRel
{
	Oid			relid;
	CommandId	cid;			/* statement that last added a record */
	uint64		nrecords;		/* live records (after the last TRUNCATE) */
	uint64		log_bytes;		/* their size in the change log */
} PendingRel;

typedef struct SubxactMark
{
	SubTransactionId subid;
	int64		pos;
} SubxactMark;

/*
 * A byte sequence of records, in memory up to streamsketch.pending_memory
 * and in a temporary file before that.
 */
typedef struct PendingSeq
{
	char	   *mem;
	Size		mem_used;
	Size		mem_cap;
	BufFile    *spill;
	int64		spill_len;
} PendingSeq;

/* All of this lives in TopTransactionContext; NULL/0 outside a transaction. */
static List *pending_rels = NIL;
static List *subxact_marks = NIL;
static PendingSeq pending;		/* the transaction's records */
static PendingSeq combined;		/* one relation's, combined at pre-commit */
static bool have_truncate = false;
static bool counts_stale = false;	/* PendingRel counts need a recount */
static bool appending = false;
static int64 last_record_pos = -1;	/* the last record, while in memory */

#define RECORD_SIZE(len) (sizeof(SSPendingHeader) + MAXALIGN(len))

/* spilled records are read back this many bytes at a time */
#define SPILL_CHUNK_SIZE	(64 * 1024)

static void pending_recount(void);

static inline int64
seq_length(const PendingSeq *seq)
{
	return seq->spill_len + (int64) seq->mem_used;
}

static void
spill_write(PendingSeq *seq, const void *data, Size len)
{
	if (seq->spill == NULL)
	{
		ResourceOwner save_owner = CurrentResourceOwner;
		MemoryContext save_cxt = MemoryContextSwitchTo(TopTransactionContext);

		/* the file must live as long as the top transaction */
		CurrentResourceOwner = TopTransactionResourceOwner;
		seq->spill = BufFileCreateTemp(false);
		CurrentResourceOwner = save_owner;
		MemoryContextSwitchTo(save_cxt);
	}
	if (BufFileSeek(seq->spill, 0, (off_t) seq->spill_len, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not seek in streamsketch pending-changes file")));
	BufFileWrite(seq->spill, (void *) data, len);
	seq->spill_len += len;
}

static void
spill_read(const PendingSeq *seq, int64 pos, void *data, Size len)
{
	if (BufFileSeek(seq->spill, 0, (off_t) pos, SEEK_SET) != 0 ||
		BufFileRead(seq->spill, data, len) != len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read streamsketch pending-changes file")));
}

/*
 * Append a record to seq; returns its position if it is in memory, else
 * -1.
 */
static int64
seq_append(PendingSeq *seq, const SSPendingHeader *hdr, const void *payload)
{
	Size		size = RECORD_SIZE(hdr->len);
	int64		pos;

	if (seq->mem == NULL)
	{
		seq->mem_cap = (Size) ss_pending_memory_kb * 1024;
		seq->mem = MemoryContextAlloc(TopTransactionContext, seq->mem_cap);
		seq->mem_used = 0;
	}
	if (seq->mem_used + size > seq->mem_cap)
	{
		if (seq->mem_used > 0)
		{
			Size		n = seq->mem_used;

			seq->mem_used = 0;
			spill_write(seq, seq->mem, n);
		}
		if (size > seq->mem_cap)
		{
			char		pad[MAXIMUM_ALIGNOF] = {0};

			spill_write(seq, hdr, sizeof(*hdr));
			if (hdr->len > 0)
				spill_write(seq, payload, hdr->len);
			if (MAXALIGN(hdr->len) > hdr->len)
				spill_write(seq, pad, MAXALIGN(hdr->len) - hdr->len);
			return -1;
		}
	}
	memcpy(seq->mem + seq->mem_used, hdr, sizeof(*hdr));
	if (hdr->len > 0)
		memcpy(seq->mem + seq->mem_used + sizeof(*hdr), payload, hdr->len);
	pos = seq_length(seq);
	seq->mem_used += size;
	return pos;
}

/* Empty seq, keeping its memory (its file is closed). */
static void
seq_clear(PendingSeq *seq)
{
	if (seq->spill != NULL)
		BufFileClose(seq->spill);
	seq->spill = NULL;
	seq->spill_len = 0;
	seq->mem_used = 0;
}

static void
pending_reset(void)
{
	seq_clear(&pending);
	seq_clear(&combined);
	/* the memory went with TopTransactionContext */
	memset(&pending, 0, sizeof(pending));
	memset(&combined, 0, sizeof(combined));
	pending_rels = NIL;
	subxact_marks = NIL;
	have_truncate = false;
	counts_stale = false;
	appending = false;
	last_record_pos = -1;
}

static void
pending_truncate(int64 pos)
{
	if (pos >= pending.spill_len)
		pending.mem_used = (Size) (pos - pending.spill_len);
	else
	{
		/* later writes overwrite the rest of the file */
		pending.spill_len = pos;
		pending.mem_used = 0;
	}
	/* recounted when next needed: reading the file here could fail */
	counts_stale = true;
	last_record_pos = -1;
}

void
ss_pending_add(Relation rel, SSPendingType type, const void *payload,
			   uint32 len)
{
	SSPendingHeader hdr;
	Oid			relid = RelationGetRelid(rel);
	CommandId	cid = GetCurrentCommandId(false);
	ListCell   *lc;
	PendingRel *pr = NULL;

	if (appending)
		elog(ERROR, "streamsketch pending changes added while appending them");

	/* a write needs an xid, or its commit would not wait for WAL flush */
	(void) GetCurrentTransactionId();

	foreach(lc, pending_rels)
	{
		if (((PendingRel *) lfirst(lc))->relid == relid)
		{
			pr = (PendingRel *) lfirst(lc);
			break;
		}
	}
	if (pr == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		pr = palloc0(sizeof(PendingRel));
		pr->relid = relid;
		pr->cid = InvalidCommandId;
		pending_rels = lappend(pending_rels, pr);
		MemoryContextSwitchTo(old);
	}

	/*
	 * Once per writing statement: a long change log is consolidated here,
	 * in the statement, rather than left to readers or VACUUM.
	 */
	if (pr->cid != cid && type != SS_PENDING_TRUNCATE)
	{
		const SSStructure *ops = ss_structure_ops(rel);

		pr->cid = cid;
		if (ops != NULL && ops->consolidate != NULL)
		{
			SSLogSnapshot snap;

			ss_log_snapshot(rel, &snap);
			ss_log_consolidate_if_long(rel, &snap);
		}
	}

	memset(&hdr, 0, sizeof(hdr));
	hdr.relid = relid;
	hdr.type = (uint16) type;
	hdr.len = len;
	hdr.rows = 1;
	if (type == SS_PENDING_TRUNCATE)
	{
		have_truncate = true;
		pr->nrecords = 0;
		pr->log_bytes = 0;
	}
	else
	{
		pr->nrecords++;
		pr->log_bytes += ss_log_record_size(&hdr, payload);
	}

	last_record_pos = seq_append(&pending, &hdr, payload);
}

/*
 * The payload of the last record added (its length in *len), if it is
 * rel's, of this type, still in memory, and added by the current subtransaction (or one
 * it committed), so that the caller may change it in place: a rollback to
 * an earlier savepoint still drops the change with the record.  NULL
 * otherwise (the caller adds a record).
 */
void *
ss_pending_last_payload(Relation rel, SSPendingType type, uint32 *len)
{
	SSPendingHeader hdr;
	char	   *at;

	if (appending || last_record_pos < pending.spill_len)
		return NULL;
	if (subxact_marks != NIL &&
		((SubxactMark *) linitial(subxact_marks))->pos > last_record_pos)
		return NULL;
	at = pending.mem + (last_record_pos - pending.spill_len);
	memcpy(&hdr, at, sizeof(hdr));
	if (hdr.relid != RelationGetRelid(rel) || hdr.type != (uint16) type)
		return NULL;
	*len = hdr.len;
	return at + sizeof(hdr);
}

bool
ss_pending_has(Oid relid)
{
	ListCell   *lc;

	foreach(lc, pending_rels)
	{
		if (((PendingRel *) lfirst(lc))->relid == relid)
			return true;
	}
	return false;
}

/*
 * The live records of relid and their size in the change log, which
 * ss_log_append needs before it writes the batch's header.
 */
uint64
ss_pending_count(Oid relid, uint64 *log_bytes)
{
	ListCell   *lc;

	if (counts_stale)
		pending_recount();
	*log_bytes = 0;
	foreach(lc, pending_rels)
	{
		PendingRel *pr = (PendingRel *) lfirst(lc);

		if (pr->relid == relid)
		{
			*log_bytes = pr->log_bytes;
			return pr->nrecords;
		}
	}
	return 0;
}

/* Count every relation's live records again (after a truncation). */
static void
pending_recount(void)
{
	ListCell   *lc;

	foreach(lc, pending_rels)
	{
		PendingRel *pr = (PendingRel *) lfirst(lc);
		SSPendingIter it;
		SSPendingHeader hdr;
		char	   *payload;

		pr->nrecords = 0;
		pr->log_bytes = 0;
		ss_pending_iter_begin(&it, pr->relid);
		while (ss_pending_iter_next(&it, &hdr, &payload))
		{
			pr->nrecords++;
			pr->log_bytes += ss_log_record_size(&hdr, payload);
		}
		ss_pending_iter_end(&it);
	}
	counts_stale = false;
}

/*
 * Bytes [pos, pos + len) of the spilled part, through the iterator's
 * read-ahead chunk (refilled from pos when they are not all in it).  NULL
 * if they are more than a chunk.
 */
static char *
spill_view(SSPendingIter *it, int64 pos, Size len)
{
	if (len > SPILL_CHUNK_SIZE)
		return NULL;
	if (it->chunk == NULL ||
		pos < it->chunk_pos || pos + (int64) len > it->chunk_pos + (int64) it->chunk_len)
	{
		if (it->chunk == NULL)
			it->chunk = palloc(SPILL_CHUNK_SIZE);
		it->chunk_pos = pos;
		it->chunk_len = (Size) Min((int64) SPILL_CHUNK_SIZE,
								   it->seq->spill_len - pos);
		spill_read(it->seq, pos, it->chunk, it->chunk_len);
		if (pos + (int64) len > it->chunk_pos + (int64) it->chunk_len)
			elog(ERROR, "streamsketch pending-changes file is truncated");
	}
	return it->chunk + (pos - it->chunk_pos);
}

/* Read the header at pos; false at the end of the log. */
static bool
read_header(SSPendingIter *it, int64 pos, SSPendingHeader *hdr)
{
	const PendingSeq *seq = it->seq;

	if (pos >= seq_length(seq))
		return false;
	if (pos < seq->spill_len)
		memcpy(hdr, spill_view(it, pos, sizeof(*hdr)), sizeof(*hdr));
	else
		memcpy(hdr, seq->mem + (pos - seq->spill_len), sizeof(*hdr));
	return true;
}

static void
seq_iter_begin(SSPendingIter *it, const PendingSeq *seq, Oid relid)
{
	it->seq = seq;
	it->relid = relid;
	it->start = 0;
	it->pos = 0;
	it->buf = NULL;
	it->bufsize = 0;
	it->chunk = NULL;
	it->chunk_pos = 0;
	it->chunk_len = 0;
}

void
ss_pending_iter_begin(SSPendingIter *it, Oid relid)
{
	seq_iter_begin(it, &pending, relid);

	/* records before the relation's last TRUNCATE are dead */
	if (have_truncate)
	{
		SSPendingHeader hdr;
		int64		pos = 0;

		while (read_header(it, pos, &hdr))
		{
			pos += RECORD_SIZE(hdr.len);
			if (hdr.relid == relid && hdr.type == SS_PENDING_TRUNCATE)
				it->start = pos;
		}
	}
	it->pos = it->start;
}

bool
ss_pending_iter_next(SSPendingIter *it, SSPendingHeader *hdr, char **payload)
{
	for (;;)
	{
		int64		pos = it->pos;

		if (!read_header(it, pos, hdr))
			return false;
		it->pos += RECORD_SIZE(hdr->len);
		if (hdr->relid != it->relid || hdr->type == SS_PENDING_TRUNCATE)
			continue;

		if (pos >= it->seq->spill_len)
			*payload = it->seq->mem + (pos - it->seq->spill_len) +
				sizeof(SSPendingHeader);
		else if ((*payload = spill_view(it, pos + sizeof(SSPendingHeader),
										 hdr->len)) == NULL)
		{
			if (it->bufsize < hdr->len)
			{
				if (it->buf)
					pfree(it->buf);
				it->bufsize = Max(hdr->len, 1024);
				it->buf = palloc(it->bufsize);
			}
			spill_read(it->seq, pos + sizeof(SSPendingHeader), it->buf,
					   hdr->len);
			*payload = it->buf;
		}
		return true;
	}
}

void
ss_pending_iter_end(SSPendingIter *it)
{
	if (it->buf)
		pfree(it->buf);
	it->buf = NULL;
	if (it->chunk)
		pfree(it->chunk);
	it->chunk = NULL;
}

/* ---------------------------------------------------------------------
 * Combining a relation's key records at pre-commit
 *
 * For a structure whose key records (SS_PENDING_KEY) commute and add up
 * (SSStructure.combine_keys: a bcms, a Bloom filter, a quotient filter),
 * the key records between two other records are appended as one record
 * per hash, its weights added and its rows counted (SSPendingHeader.rows),
 * in the order of each hash's first record.  A large transaction over few
 * distinct keys then writes (and WAL-logs) a log in proportion to its keys,
 * not its rows.  Any other record (a delete, a merge) first has the
 * combined records before it emitted, then itself: a quotient filter's
 * delete still comes after every earlier insert of its key.  The
 * transaction's own readers keep reading the uncombined pending records.
 *
 * The hash table holds at most work_mem bytes; when it is full its records
 * are emitted and it starts over, so a key may get several records, never
 * a wrong total.  A pair whose weights or rows would overflow is not
 * combined: the later record starts a new entry.
 * ---------------------------------------------------------------------
 */

/*
 * Batches of fewer records are appended as they are: they fill at most
 * four log pages (24 bytes a record), so combining could save little, and
 * the transactions of a row or a few, by far the most common, skip the
 * pass over their records and the table's allocation.  Tests whose change
 * log must be long raise it (streamsketch.test_combine_min_records).
 */
static int	combine_min_records = 1024;

typedef struct CombineEntry
{
	SSPendingKey key;
	uint32		rows;
} CombineEntry;

typedef struct Combiner
{
	Oid			relid;
	CombineEntry *entries;		/* in the order of their first record */
	uint32		nentries;
	uint32		max_entries;
	uint32	   *slots;			/* open addressing: entry index + 1, or 0 */
	uint32		mask;
	uint64		nrecords;		/* emitted into the combined sequence */
	uint64		log_bytes;		/* and their size in the change log */
} Combiner;

static void
combine_emit(Combiner *c, const SSPendingHeader *hdr, const void *payload)
{
	(void) seq_append(&combined, hdr, payload);
	c->nrecords++;
	c->log_bytes += ss_log_record_size(hdr, payload);
}

/* Emit the table's records and empty it. */
static void
combine_flush(Combiner *c)
{
	SSPendingHeader hdr;

	if (c->nentries == 0)
		return;
	memset(&hdr, 0, sizeof(hdr));
	hdr.relid = c->relid;
	hdr.type = SS_PENDING_KEY;
	hdr.len = sizeof(SSPendingKey);
	for (uint32 i = 0; i < c->nentries; i++)
	{
		hdr.rows = c->entries[i].rows;
		combine_emit(c, &hdr, &c->entries[i].key);
	}
	c->nentries = 0;
	memset(c->slots, 0, sizeof(uint32) * ((Size) c->mask + 1));
}

static inline uint32
combine_home(const Combiner *c, const SSPendingKey *key)
{
	return (uint32) (key->hash.h2 ^ (key->hash.h1 >> 32)) & c->mask;
}

static void
combine_key(Combiner *c, const SSPendingKey *key, uint32 rows)
{
	uint32		i = combine_home(c, key);

	for (; c->slots[i] != 0; i = (i + 1) & c->mask)
	{
		CombineEntry *e = &c->entries[c->slots[i] - 1];
		int64		sum;

		if (e->key.hash.h1 != key->hash.h1 || e->key.hash.h2 != key->hash.h2)
			continue;
		if (e->rows <= PG_UINT32_MAX - rows &&
			!pg_add_s64_overflow(e->key.weight, key->weight, &sum))
		{
			e->key.weight = sum;
			e->rows += rows;
			return;
		}
		/* a new entry takes over the slot; the full one is emitted first */
		break;
	}
	if (c->nentries == c->max_entries)
	{
		combine_flush(c);
		i = combine_home(c, key);
	}
	c->entries[c->nentries].key = *key;
	c->entries[c->nentries].rows = rows;
	c->slots[i] = ++c->nentries;
}

/* Combine the key records of the source into the combined sequence. */
static void
combine_key_records(Oid relid, uint64 live, SSLogSource *src, Combiner *c)
{
	MemoryContext cxt;
	SSPendingHeader hdr;
	char	   *payload;
	uint64		max_entries;
	uint64		n = 0;

	/* the table's; the source's buffers outlive it */
	cxt = AllocSetContextCreate(CurrentMemoryContext,
								"streamsketch combined records",
								ALLOCSET_DEFAULT_SIZES);
	c->relid = relid;
	/* an entry and two slots of a table at most half full */
	max_entries = (uint64) work_mem * 1024 /
		(sizeof(CombineEntry) + 2 * sizeof(uint32));
	max_entries = Max(Min(Min(max_entries, live), PG_INT32_MAX / 2), 1);
	c->max_entries = (uint32) max_entries;
	c->mask = pg_nextpower2_32(c->max_entries * 2) - 1;
	c->entries = MemoryContextAllocHuge(cxt, sizeof(CombineEntry) * max_entries);
	c->slots = MemoryContextAllocHuge(cxt, sizeof(uint32) * ((Size) c->mask + 1));
	memset(c->slots, 0, sizeof(uint32) * ((Size) c->mask + 1));

	while (src->next(src->arg, &hdr, &payload))
	{
		if ((++n & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		if (hdr.type == SS_PENDING_KEY && hdr.len == sizeof(SSPendingKey))
		{
			SSPendingKey key;

			memcpy(&key, payload, sizeof(key));
			combine_key(c, &key, hdr.rows);
			continue;
		}
		/* every key record before another record stays before it */
		combine_flush(c);
		combine_emit(c, &hdr, payload);
	}
	combine_flush(c);
	MemoryContextDelete(cxt);
}

/* combine_batch's emit: a record into the combined sequence */
static void
combine_batch_emit(void *arg, const SSPendingHeader *hdr, const void *payload)
{
	combine_emit((Combiner *) arg, hdr, payload);
}

static void
combine_error_context(void *arg)
{
	errcontext("combining the changes of \"%s\" at commit",
			   RelationGetRelationName((Relation) arg));
}

static bool pending_source_next(void *arg, SSPendingHeader *hdr,
								char **payload);

/*
 * Combine pr's records into the combined sequence, if its structure takes
 * combined records (its key records, or its own through combine_batch) and
 * it has enough of them; their count and log bytes in *nrecords and
 * *log_bytes.  False if they are appended as they are.
 */
static bool
pending_combine(Relation rel, PendingRel *pr, uint64 *nrecords,
				uint64 *log_bytes)
{
	const SSStructure *ops = ss_structure_ops(rel);
	Combiner	c;
	SSPendingIter it;
	SSLogSource src;
	ErrorContextCallback errcb;
	uint64		live;

	live = ss_pending_count(pr->relid, log_bytes);
	if ((!ops->combine_keys && ops->combine_batch == NULL) ||
		live < (uint64) combine_min_records)
		return false;

	memset(&c, 0, sizeof(c));
	c.relid = pr->relid;
	seq_clear(&combined);
	ss_pending_iter_begin(&it, pr->relid);
	src.nrecords = live;
	src.log_bytes = *log_bytes;
	src.arg = &it;
	src.next = pending_source_next;
	/* a structure's own combining may run user code, which may fail */
	errcb.callback = combine_error_context;
	errcb.arg = rel;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	if (ops->combine_batch != NULL)
		ops->combine_batch(rel, &src, combine_batch_emit, &c);
	else
		combine_key_records(pr->relid, live, &src, &c);
	error_context_stack = errcb.previous;
	ss_pending_iter_end(&it);
	*nrecords = c.nrecords;
	*log_bytes = c.log_bytes;
	return true;
}

/*
 * At pre-commit (and pre-prepare), each pending relation's records become a
 * batch of its change log (ss_changelog.c): bounded work, interruptible,
 * and without effect unless the commit record follows.  An error here
 * aborts the transaction, and the abort callback discards the log.
 */
static bool
pending_source_next(void *arg, SSPendingHeader *hdr, char **payload)
{
	return ss_pending_iter_next((SSPendingIter *) arg, hdr, payload);
}

static void
pending_append_all(void)
{
	ListCell   *lc;
	SSPendingIter it;
	SSLogSource src;

	appending = true;
	foreach(lc, pending_rels)
	{
		PendingRel *pr = (PendingRel *) lfirst(lc);
		Relation	rel;
		uint64		log_bytes;

		/* dropped later in this transaction: nothing to append */
		rel = try_relation_open(pr->relid, RowExclusiveLock);
		if (rel == NULL)
			continue;
		if (ss_structure_ops(rel) == NULL)
			elog(ERROR, "relation \"%s\" is not a streamsketch structure",
				 RelationGetRelationName(rel));
		src.arg = &it;
		src.next = pending_source_next;
		if (pending_combine(rel, pr, &src.nrecords, &src.log_bytes))
			seq_iter_begin(&it, &combined, pr->relid);
		else
		{
			src.nrecords = ss_pending_count(pr->relid, &src.log_bytes);
			ss_pending_iter_begin(&it, pr->relid);
		}
		log_bytes = ss_log_append(rel, &src);
		ss_pending_iter_end(&it);
		seq_clear(&combined);
		ss_worker_note_append(rel, log_bytes);
		relation_close(rel, NoLock);
	}
	appending = false;
}

static void
pending_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			/*
			 * A prepared transaction's batch waits in the log for its xid's
			 * fate like any other: it counts once COMMIT PREPARED runs.
			 */
			if (pending_rels != NIL)
				pending_append_all();
			pending_reset();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			ss_worker_forget();
			ss_xlog_at_abort();
			ss_cons_at_abort(1);
			pending_reset();
			break;
		case XACT_EVENT_COMMIT:
			/* the background worker may now consolidate the batches */
			ss_worker_at_commit();
			pending_reset();
			break;
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			/* a prepared batch counts after COMMIT PREPARED, elsewhere */
			ss_worker_forget();
			pending_reset();
			break;
		default:
			break;
	}
}

static void
pending_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	switch (event)
	{
		case SUBXACT_EVENT_START_SUB:
			{
				MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
				SubxactMark *mark = palloc(sizeof(SubxactMark));

				mark->subid = mySubid;
				mark->pos = seq_length(&pending);
				subxact_marks = lcons(mark, subxact_marks);
				MemoryContextSwitchTo(old);
				break;
			}
		case SUBXACT_EVENT_ABORT_SUB:
		case SUBXACT_EVENT_COMMIT_SUB:
			if (event == SUBXACT_EVENT_ABORT_SUB)
			{
				ss_xlog_at_abort();
				ss_cons_at_abort(GetCurrentTransactionNestLevel());
			}
			while (subxact_marks != NIL)
			{
				SubxactMark *mark = (SubxactMark *) linitial(subxact_marks);

				if (mark->subid < mySubid)
					break;
				if (event == SUBXACT_EVENT_ABORT_SUB && mark->subid == mySubid)
					pending_truncate(mark->pos);
				subxact_marks = list_delete_first(subxact_marks);
				if (mark->subid == mySubid)
					break;
			}
			break;
		default:
			break;
	}
}

/* before the settings' prefix is reserved (_PG_init) */
void
ss_pending_define_settings(void)
{
	ss_test_define_int("streamsketch.test_combine_min_records",
					   "Combines a transaction's key records per key only if it has at least this many (for tests only).",
					   "Tests that need a long change log from few keys raise it.",
					   &combine_min_records, 1024, 1, INT_MAX, NULL);
}

void
ss_pending_init(void)
{
	RegisterXactCallback(pending_xact_callback, NULL);
	RegisterSubXactCallback(pending_subxact_callback, NULL);
}

