/*-------------------------------------------------------------------------
 *
 * ss_pending.c
 *	  The log of a transaction's pending changes (see ss_pending.h).
 *
 * The log is a byte sequence of MAXALIGNed records: the first spill_len
 * bytes are in a temporary file, the rest (mem_used bytes) in memory.
 * Records never straddle the two parts, because the memory part is written
 * out whole and an oversized record goes straight to the file.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "ss_changelog.h"
#include "ss_pending.h"
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

/* All of this lives in TopTransactionContext; NULL/0 outside a transaction. */
static List *pending_rels = NIL;
static List *subxact_marks = NIL;
static char *mem = NULL;
static Size mem_used = 0;
static Size mem_cap = 0;
static BufFile *spill = NULL;
static int64 spill_len = 0;
static bool have_truncate = false;
static bool counts_stale = false;	/* PendingRel counts need a recount */
static bool appending = false;
static int64 last_record_pos = -1;	/* the last record, while in memory */

#define RECORD_SIZE(len) (sizeof(SSPendingHeader) + MAXALIGN(len))

/* spilled records are read back this many bytes at a time */
#define SPILL_CHUNK_SIZE	(64 * 1024)

static void pending_recount(void);

static inline int64
log_length(void)
{
	return spill_len + (int64) mem_used;
}

static void
spill_write(const void *data, Size len)
{
	if (spill == NULL)
	{
		ResourceOwner save_owner = CurrentResourceOwner;
		MemoryContext save_cxt = MemoryContextSwitchTo(TopTransactionContext);

		/* the file must live as long as the top transaction */
		CurrentResourceOwner = TopTransactionResourceOwner;
		spill = BufFileCreateTemp(false);
		CurrentResourceOwner = save_owner;
		MemoryContextSwitchTo(save_cxt);
	}
	if (BufFileSeek(spill, 0, (off_t) spill_len, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not seek in streamsketch pending-changes file")));
	BufFileWrite(spill, (void *) data, len);
	spill_len += len;
}

static void
spill_read(int64 pos, void *data, Size len)
{
	if (BufFileSeek(spill, 0, (off_t) pos, SEEK_SET) != 0 ||
		BufFileRead(spill, data, len) != len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read streamsketch pending-changes file")));
}

static void
pending_reset(void)
{
	if (spill != NULL)
		BufFileClose(spill);
	spill = NULL;
	spill_len = 0;
	mem = NULL;
	mem_used = 0;
	mem_cap = 0;
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
	if (pos >= spill_len)
		mem_used = (Size) (pos - spill_len);
	else
	{
		/* later writes overwrite the rest of the file */
		spill_len = pos;
		mem_used = 0;
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
	Size		size = RECORD_SIZE(len);
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

	if (mem == NULL)
	{
		mem_cap = (Size) ss_pending_memory_kb * 1024;
		mem = MemoryContextAlloc(TopTransactionContext, mem_cap);
		mem_used = 0;
	}

	memset(&hdr, 0, sizeof(hdr));
	hdr.relid = relid;
	hdr.type = (uint16) type;
	hdr.len = len;
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

	last_record_pos = -1;
	if (mem_used + size > mem_cap)
	{
		if (mem_used > 0)
		{
			Size		n = mem_used;

			mem_used = 0;
			spill_write(mem, n);
		}
		if (size > mem_cap)
		{
			char		pad[MAXIMUM_ALIGNOF] = {0};

			spill_write(&hdr, sizeof(hdr));
			if (len > 0)
				spill_write(payload, len);
			if (MAXALIGN(len) > len)
				spill_write(pad, MAXALIGN(len) - len);
			return;
		}
	}
	memcpy(mem + mem_used, &hdr, sizeof(hdr));
	if (len > 0)
		memcpy(mem + mem_used + sizeof(hdr), payload, len);
	last_record_pos = log_length();
	mem_used += size;
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

	if (appending || last_record_pos < spill_len)
		return NULL;
	if (subxact_marks != NIL &&
		((SubxactMark *) linitial(subxact_marks))->pos > last_record_pos)
		return NULL;
	at = mem + (last_record_pos - spill_len);
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
		it->chunk_len = (Size) Min((int64) SPILL_CHUNK_SIZE, spill_len - pos);
		spill_read(pos, it->chunk, it->chunk_len);
		if (pos + (int64) len > it->chunk_pos + (int64) it->chunk_len)
			elog(ERROR, "streamsketch pending-changes file is truncated");
	}
	return it->chunk + (pos - it->chunk_pos);
}

/* Read the header at pos; false at the end of the log. */
static bool
read_header(SSPendingIter *it, int64 pos, SSPendingHeader *hdr)
{
	if (pos >= log_length())
		return false;
	if (pos < spill_len)
		memcpy(hdr, spill_view(it, pos, sizeof(*hdr)), sizeof(*hdr));
	else
		memcpy(hdr, mem + (pos - spill_len), sizeof(*hdr));
	return true;
}

void
ss_pending_iter_begin(SSPendingIter *it, Oid relid)
{
	it->relid = relid;
	it->start = 0;
	it->buf = NULL;
	it->bufsize = 0;
	it->chunk = NULL;
	it->chunk_pos = 0;
	it->chunk_len = 0;

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

		if (pos >= spill_len)
			*payload = mem + (pos - spill_len) + sizeof(SSPendingHeader);
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
			spill_read(pos + sizeof(SSPendingHeader), it->buf, hdr->len);
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
		src.nrecords = ss_pending_count(pr->relid, &src.log_bytes);
		src.arg = &it;
		src.next = pending_source_next;
		ss_pending_iter_begin(&it, pr->relid);
		log_bytes = ss_log_append(rel, &src);
		ss_pending_iter_end(&it);
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
				mark->pos = log_length();
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

void
ss_pending_init(void)
{
	RegisterXactCallback(pending_xact_callback, NULL);
	RegisterSubXactCallback(pending_subxact_callback, NULL);
}

