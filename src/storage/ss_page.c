/*-------------------------------------------------------------------------
 *
 * ss_page.c
 *	  Page initialization and checks shared by every structure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "commands/defrem.h"

#include "ss_xlog.h"
#include "miscadmin.h"
#include "ss_page.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/smgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

void
ss_page_init(Page page, uint16 page_type, Size data_size)
{
	SSPageOpaque opaque;

	Assert(data_size <= SS_PAGE_DATA_SIZE);
	PageInit(page, BLCKSZ, sizeof(SSPageOpaqueData));
	opaque = SSPageGetOpaque(page);
	opaque->applied_pos = 0;
	opaque->page_type = page_type;
	opaque->flags = 0;
	opaque->epoch = 0;
	opaque->page_id = SS_PAGE_ID;
	/* contents live below pd_lower, so GenericXLog keeps them */
	((PageHeader) page)->pd_lower = MAXALIGN(SizeOfPageHeaderData) + data_size;
}

/* The access method's name, for messages about a structure. */
const char *
ss_structure_name(Relation rel)
{
	char	   *name = get_am_name(rel->rd_rel->relam);

	return name ? name : "streamsketch";
}

/*
 * Report damage found on block blkno of a structure: XX001 naming the
 * relation and block, the check that failed as detail, and the same hint as
 * a damaged metapage (ss_meta_validate).  Every check of data read from a
 * page ends here, so that a damaged page never leads to a crash, a hang or
 * an answer computed from garbage.  blkno InvalidBlockNumber: a change-log
 * record found damaged by a structure's callback (ss_changelog.h).
 */
void
ss_page_corrupted(Relation rel, BlockNumber blkno, const char *fmt,...)
{
	char		detail[256];
	va_list		args;

	va_start(args, fmt);
	vsnprintf(detail, sizeof(detail), fmt, args);
	va_end(args);
	/* a record of the change log, whose page the caller no longer knows */
	if (blkno == InvalidBlockNumber)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("change log of %s table \"%s\" is corrupted",
						ss_structure_name(rel), RelationGetRelationName(rel)),
				 errdetail_internal("%s", detail),
				 errhint("Restore the table from a backup, or TRUNCATE it to start over with the parameters of its label.")));
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("block %u of %s table \"%s\" is corrupted",
					blkno, ss_structure_name(rel), RelationGetRelationName(rel)),
			 errdetail_internal("%s", detail),
			 errhint("Restore the table from a backup, or TRUNCATE it to start over with the parameters of its label.")));
}

void
ss_page_check(Relation rel, BlockNumber blkno, Page page, uint16 page_type)
{
	SSPageOpaque opaque;
	PageHeader	ph = (PageHeader) page;

	if (PageIsNew(page))
		return;
	if (PageGetSpecialSize(page) != MAXALIGN(sizeof(SSPageOpaqueData)))
		ss_page_corrupted(rel, blkno,
						  "The page's special space has %u bytes, expected %zu: it is not a streamsketch page.",
						  (unsigned) PageGetSpecialSize(page),
						  (size_t) MAXALIGN(sizeof(SSPageOpaqueData)));
	opaque = SSPageGetOpaque(page);
	if (opaque->page_id != SS_PAGE_ID ||
		(opaque->page_type != page_type &&
		 !(page_type == SS_PAGE_CBT_FREE &&
		   opaque->page_type == CBT_FREE_PAGE_TYPE_EARLIER)))
		ss_page_corrupted(rel, blkno,
						  "Found page id 0x%04X type %u, expected 0x%04X type %u.",
						  opaque->page_id, opaque->page_type,
						  SS_PAGE_ID, page_type);

	/*
	 * Our pages keep their contents below pd_lower (ss_page_init), which
	 * generic WAL keeps; pd_upper is the special space's start.  Anything
	 * else means the header was damaged, and the contents may not be what
	 * WAL replay would restore.
	 */
	if (ph->pd_lower < MAXALIGN(SizeOfPageHeaderData) ||
		ph->pd_lower > ph->pd_special || ph->pd_upper != ph->pd_special)
		ss_page_corrupted(rel, blkno,
						  "The page header has pd_lower %u, pd_upper %u, pd_special %u.",
						  ph->pd_lower, ph->pd_upper, ph->pd_special);
}

SSMetaHeader *
ss_meta_check(Relation rel, Page page, uint32 kind)
{
	SSMetaHeader *meta;

	if (PageIsNew(page))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("metapage of relation \"%s\" is uninitialized",
						RelationGetRelationName(rel)),
				 errhint("The relation is corrupted; restore it from a backup or TRUNCATE it.")));
	ss_page_check(rel, SS_METAPAGE_BLKNO, page, SS_PAGE_META);
	meta = (SSMetaHeader *) SSPageGetData(page);
	if (meta->magic != SS_META_MAGIC)
		ss_page_corrupted(rel, SS_METAPAGE_BLKNO,
						  "The metapage has magic number 0x%08X, expected 0x%08X.",
						  meta->magic, SS_META_MAGIC);
	/*
	 * Formats 1 and 2 were written by earlier streamsketch versions: such a
	 * relation is intact, just not readable by this build.  Any other
	 * number is damage (a build cannot tell a format from the future from
	 * a damaged one, and downgrades are not supported).
	 */
	if (meta->version >= 1 && meta->version < SS_META_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"%s\" has streamsketch format version %u, this build reads version %u",
						RelationGetRelationName(rel), meta->version,
						SS_META_VERSION),
				 errhint("Install the streamsketch version that created the relation.")));
	if (meta->version != SS_META_VERSION)
		ss_page_corrupted(rel, SS_METAPAGE_BLKNO,
						  "The metapage has format version %u; this build reads version %u and knows versions 1 to %u.",
						  meta->version, SS_META_VERSION, SS_META_VERSION);
	if (meta->kind != (uint32) kind)
		ss_page_corrupted(rel, SS_METAPAGE_BLKNO,
						  "The metapage holds a structure of kind %u, expected %u.",
						  meta->kind, (unsigned) kind);
	return meta;
}

/*
 * Refuse a structure of npages pages that would exceed
 * streamsketch.max_structure_size: at creation (from its parameters), and
 * whenever it is extended, so that no parameter, growth or damaged
 * metapage can fill the disk.
 */
/* set while ss_meta_validate checks an existing metapage */
static bool validating_existing_meta = false;

void
ss_check_structure_pages(uint64 npages, const char *relname)
{
	uint64		limit;

	/*
	 * A structure that exists was within the limit when it was made; a
	 * DBA who lowers the setting must not make it unreadable (its writes
	 * are still bounded by ss_extend_to).
	 */
	if (validating_existing_meta)
		return;
	limit = (uint64) ss_max_structure_size_mb * 1024 * 1024 / BLCKSZ;

	if (npages > limit)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 relname ?
				 errmsg("streamsketch table \"%s\" would exceed streamsketch.max_structure_size",
						relname) :
				 errmsg("the structure would exceed streamsketch.max_structure_size"),
				 errdetail("It would need " UINT64_FORMAT " MB; the limit is %d MB.",
						   (npages * BLCKSZ + 1024 * 1024 - 1) / (1024 * 1024),
						   ss_max_structure_size_mb),
				 errhint("Choose smaller parameters, or raise streamsketch.max_structure_size.")));
}

/*
 * Make sure block blkno exists.  Structures are sparse: a page that was
 * never written reads as all zeros (PageIsNew), and is treated as empty.
 * Only block blkno is written, as a zero page straight through smgr: the
 * blocks between the old end and blkno stay holes in the file, which read
 * as zeros too, so touching a far page costs one write (and one per 1 GB
 * segment boundary crossed), never a zero fill of everything before it,
 * and does not pass through shared buffers and evict the hot pages.  The
 * zero page is not WAL-logged: a standby or a crashed primary may have a
 * shorter file, and readers treat blocks beyond the end as empty too.
 *
 * Locking: takes and releases the relation extension lock; the caller must
 * hold no buffer lock.
 */
void
ss_extend_to(Relation rel, BlockNumber blkno)
{
	PGAlignedBlock zerobuf;

	if (ss_block_known_to_exist(rel, blkno) ||
		blkno < RelationGetNumberOfBlocks(rel))
		return;

	ss_check_structure_pages((uint64) blkno + 1, RelationGetRelationName(rel));
	memset(zerobuf.data, 0, BLCKSZ);
	LockRelationForExtension(rel, ExclusiveLock);
	if (blkno >= RelationGetNumberOfBlocks(rel))
		smgrextend(RelationGetSmgr(rel), MAIN_FORKNUM, blkno, zerobuf.data,
				   false);
	UnlockRelationForExtension(rel, ExclusiveLock);
}

/*
 * Does block blkno exist, as far as known without asking the kernel?  And
 * ss_read_buffer_if_exists: pin block blkno, or return InvalidBuffer if the
 * relation is shorter (structures are sparse, see ss_extend_to).
 *
 * Point queries probe several
 * pages, and an lseek() per probe for the relation size was a fifth of a
 * query's CPU, so the size smgr cached at its last check is used when it
 * already covers blkno.  It is a lower bound: our relations only grow, a
 * new relfilenode (TRUNCATE, rewrite) gets a new SMgrRelation, and an
 * in-place truncation sends an smgr invalidation that resets the cache.
 * ss_block_known_to_exist tells whether that cache already covers blkno.
 */
bool
ss_block_known_to_exist(Relation rel, BlockNumber blkno)
{
	BlockNumber known = RelationGetSmgr(rel)->smgr_cached_nblocks[MAIN_FORKNUM];

	return known != InvalidBlockNumber && blkno < known;
}

/*
 * Pin block blkno if it is in shared buffers, without any I/O; else
 * InvalidBuffer.  A writer that holds content locks on other pages and
 * must not wait for a read under them takes the next page this way (and
 * otherwise releases its locks first).
 */
Buffer
ss_pin_if_cached(Relation rel, BlockNumber blkno)
{
	PrefetchBufferResult pr;

	/* prefetching a block past the end of the file is an error */
	if (!ss_block_known_to_exist(rel, blkno))
		return InvalidBuffer;
	pr = PrefetchBuffer(rel, MAIN_FORKNUM, blkno);
	if (!BufferIsValid(pr.recent_buffer) ||
		!ReadRecentBuffer(rel->rd_node, MAIN_FORKNUM, blkno, pr.recent_buffer))
		return InvalidBuffer;
	return pr.recent_buffer;
}

/*
 * Ask the kernel to read block blkno ahead, if it is known to exist (a
 * block number read from a damaged page must not make the prefetch fail;
 * the read that follows reports the damage).
 */
void
ss_prefetch(Relation rel, BlockNumber blkno)
{
	if (ss_block_known_to_exist(rel, blkno))
		(void) PrefetchBuffer(rel, MAIN_FORKNUM, blkno);
}

/*
 * Rings of buffers (buffer access strategies) for reads and writes that
 * touch many pages once, as a heap's sequential scan, COPY and CREATE
 * DATABASE's copy of a relation do: the pages they bring in are recycled
 * within a small ring instead of evicting the rest of shared_buffers
 * (pages already there are used where they are, without raising their
 * usage count).  One of each per backend, allocated at first use and
 * shared by every such reader or writer of the backend: the callers copy
 * a page out (or write it) and release it before taking the next, so
 * several cursors taking turns in one ring only make it recycle sooner.
 *
 *	ss_bulk_read_ring	BAS_BULKREAD (256 kB): whole-relation reads (a
 *						scan of every group or sampled row, cbt_finalize)
 *						and the sources of out-of-place merges (levels and
 *						runs read front to back).
 *	ss_bulk_write_ring	BAS_BULKWRITE (16 MB, at most shared_buffers / 8):
 *						the pages an out-of-place merge writes.  A dirty
 *						buffer the ring comes back to is written by the
 *						backend itself, after flushing WAL up to the page's
 *						LSN (WAL before data, as for COPY into a heap).
 *
 * Pages that must stay hot (metapages, a structure's level 0 or buffer,
 * indexes and filters probed per key) are never read or written through
 * a ring.
 */
static BufferAccessStrategy bulk_read_ring = NULL;
static BufferAccessStrategy bulk_write_ring = NULL;

static BufferAccessStrategy
make_ring(BufferAccessStrategyType btype)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	BufferAccessStrategy ring = GetAccessStrategy(btype);

	MemoryContextSwitchTo(old);
	return ring;
}

BufferAccessStrategy
ss_bulk_read_ring(void)
{
	if (bulk_read_ring == NULL)
		bulk_read_ring = make_ring(BAS_BULKREAD);
	return bulk_read_ring;
}

BufferAccessStrategy
ss_bulk_write_ring(void)
{
	if (bulk_write_ring == NULL)
		bulk_write_ring = make_ring(BAS_BULKWRITE);
	return bulk_write_ring;
}

/*
 * The strategy of ss_read_buffer_if_exists: the bulk-read ring around
 * each call of a whole-relation read (ss_bulk_read_begin/end), so that
 * statements run between two fetches of a cursor do not inherit it; an
 * error resets it at the end of the (sub)transaction.
 */
static BufferAccessStrategy current_strategy = NULL;
static bool strategy_callbacks = false;

static void
reset_strategy_at_xact_end(XactEvent event, void *arg)
{
	current_strategy = NULL;
}

static void
reset_strategy_at_subxact_end(SubXactEvent event, SubTransactionId mySubid,
							  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		current_strategy = NULL;
}

BufferAccessStrategy
ss_bulk_read_begin(void)
{
	BufferAccessStrategy prev = current_strategy;

	if (!strategy_callbacks)
	{
		RegisterXactCallback(reset_strategy_at_xact_end, NULL);
		RegisterSubXactCallback(reset_strategy_at_subxact_end, NULL);
		strategy_callbacks = true;
	}
	current_strategy = ss_bulk_read_ring();
	return prev;
}

void
ss_bulk_read_end(BufferAccessStrategy prev)
{
	current_strategy = prev;
}

Buffer
ss_read_buffer_if_exists(Relation rel, BlockNumber blkno)
{
	return ss_read_buffer_with(rel, blkno, current_strategy);
}

/* As ss_read_buffer_if_exists, through the given ring (NULL: none). */
Buffer
ss_read_buffer_with(Relation rel, BlockNumber blkno,
					BufferAccessStrategy strategy)
{
	if (!ss_block_known_to_exist(rel, blkno) &&
		blkno >= RelationGetNumberOfBlocks(rel))
		return InvalidBuffer;
	return ReadBufferExtended(rel, MAIN_FORKNUM, blkno, RBM_NORMAL, strategy);
}

/*
 * Read the metapage into meta (size bytes from the page's data area).
 * Returns false if the relation has no metapage yet (never written,
 * truncated, reset after a crash, or on a standby before the first WAL
 * record arrived).
 */
bool
ss_read_metapage(Relation rel, uint32 kind, void *meta, Size size)
{
	Buffer		buf;
	Page		page;

	buf = ss_read_buffer_if_exists(rel, SS_METAPAGE_BLKNO);
	if (!BufferIsValid(buf))
		return false;
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (PageIsNew(page))
	{
		UnlockReleaseBuffer(buf);
		return false;
	}
	ss_meta_check(rel, page, kind);
	memcpy(meta, SSPageGetData(page), size);
	UnlockReleaseBuffer(buf);
	return true;
}

/*
 * Check the contents of a metapage read from disk with check, which
 * re-derives what the code relies on and raises any error on a mismatch;
 * the error is reported as data corruption of the relation's block 0.
 * check must only compute (no buffers, locks or allocations that outlive
 * it), since its error is caught here.
 */
void
ss_meta_validate(Relation rel, void (*check) (Relation rel, const void *meta),
				 const void *meta)
{
	MemoryContext ctx = CurrentMemoryContext;
	ErrorData  *edata;

	PG_TRY();
	{
		validating_existing_meta = true;
		check(rel, meta);
		validating_existing_meta = false;
	}
	PG_CATCH();
	{
		validating_existing_meta = false;
		MemoryContextSwitchTo(ctx);
		edata = CopyErrorData();
		/* a cancel or an out-of-memory error is not about the page */
		if (edata->elevel > ERROR ||
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION ||
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_INSUFFICIENT_RESOURCES)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("metapage (block 0) of %s table \"%s\" is corrupted",
						ss_structure_name(rel), RelationGetRelationName(rel)),
				 errdetail("%s", edata->message),
				 errhint("Restore the table from a backup, or TRUNCATE it to start over with the parameters of its label.")));
	}
	PG_END_TRY();
}

/*
 * The header every metapage starts with; layout_end is the first block
 * after the structure's fixed layout, where log pages may go (0: none).
 */
void
ss_meta_header_init(SSMetaHeader *hdr, uint32 kind, uint32 seed,
					BlockNumber layout_end)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->log.head_blk = InvalidBlockNumber;
	hdr->log.end_blk = InvalidBlockNumber;
	hdr->log.free_blk = InvalidBlockNumber;
	hdr->log.alloc_end = layout_end;
	hdr->magic = SS_META_MAGIC;
	hdr->version = SS_META_VERSION;
	hdr->kind = kind;
	hdr->seed = seed;
}

/*
 * Lock the metapage exclusively and register it in state for an update.
 * Returns the structure's metadata in the record's copy of the page: the
 * caller changes it, then calls ss_xlog_finish(state) and
 * UnlockReleaseBuffer(*bufp).
 */
void *
ss_meta_register(Relation rel, uint32 kind, SSXLogState *state, Buffer *bufp)
{
	Buffer		buf = ReadBuffer(rel, SS_METAPAGE_BLKNO);

	Page		page;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	ss_meta_check(rel, BufferGetPage(buf), kind);
	*bufp = buf;
	page = ss_xlog_register(state, buf, 0);

	/*
	 * The whole data area: a structure's metadata may have grown since its
	 * metapage was made (pd_lower then covered less), and generic WAL
	 * zeroes what lies past pd_lower.  The new fields read as zeros until
	 * set.
	 */
	((PageHeader) page)->pd_lower = ((PageHeader) page)->pd_special;
	return SSPageGetData(page);
}

/*
 * Create the metapage with contents meta if the relation has none.  Runs
 * under the relation extension lock so that concurrent first writers create
 * it once; block 0 may exist as a zero page if a crash lost the WAL record
 * that initialized it, so that case is initialized too.
 */
void
ss_ensure_metapage(Relation rel, uint32 kind, const void *meta, Size size)
{
	Buffer		buf;

	if (RelationGetNumberOfBlocks(rel) == 0)
	{
		LockRelationForExtension(rel, ExclusiveLock);
		if (RelationGetNumberOfBlocks(rel) == 0)
		{
			buf = ReadBufferExtended(rel, MAIN_FORKNUM, P_NEW, RBM_NORMAL, NULL);
			Assert(BufferGetBlockNumber(buf) == SS_METAPAGE_BLKNO);
			ReleaseBuffer(buf);
		}
		UnlockRelationForExtension(rel, ExclusiveLock);
	}

	buf = ReadBuffer(rel, SS_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	if (PageIsNew(BufferGetPage(buf)))
	{
		SSXLogState *state = ss_xlog_start(rel);
		Page		page = ss_xlog_register(state, buf, SS_XLOG_FULL_IMAGE);

		ss_page_init(page, SS_PAGE_META, size);
		memcpy(SSPageGetData(page), meta, size);
		ss_xlog_finish(state);
	}
	else
		ss_meta_check(rel, BufferGetPage(buf), kind);
	UnlockReleaseBuffer(buf);
}

/*
 * Pin and exclusively lock block blkno, extending the relation if needed,
 * and register it in a GenericXLog state.  Returns the page to modify; a
 * never-written page is initialized with data_size zero bytes of data (and
 * logged as a full image).  *isnew tells the caller, if not NULL.
 */
Page
ss_lock_page_for_write(Relation rel, SSXLogState *state,
					   BlockNumber blkno, uint16 page_type, Size data_size,
					   Buffer *bufp, bool *isnew)
{
	Buffer		buf;
	Page		page;
	bool		fresh;

	ss_extend_to(rel, blkno);
	buf = ReadBuffer(rel, blkno);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	fresh = PageIsNew(BufferGetPage(buf));
	if (!fresh)
		ss_page_check(rel, blkno, BufferGetPage(buf), page_type);
	page = ss_xlog_register(state, buf,
									 fresh ? SS_XLOG_FULL_IMAGE : 0);
	if (fresh)
	{
		ss_page_init(page, page_type, data_size);
		memset(SSPageGetData(page), 0, data_size);
	}
	*bufp = buf;
	if (isnew)
		*isnew = fresh;
	return page;
}

/*
 * The fill count of sub-buffer slot of buffer page blkno, whose data area
 * starts with one uint32 count per sub-buffer (bcms and bloom_filter
 * buffer pages), read under a share lock; 0 for a page never written.
 * The flush functions peek with it so that empty sub-buffers cost no WAL.
 */
uint32
ss_subbuf_count(Relation rel, BlockNumber blkno, uint16 page_type, uint32 slot)
{
	Buffer		buf = ss_read_buffer_if_exists(rel, blkno);
	uint32		n = 0;

	if (!BufferIsValid(buf))
		return 0;
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	if (!PageIsNew(BufferGetPage(buf)))
	{
		ss_page_check(rel, blkno, BufferGetPage(buf), page_type);
		n = ((const uint32 *) SSPageGetData(BufferGetPage(buf)))[slot];
	}
	UnlockReleaseBuffer(buf);
	return n;
}

/*
 * The sum of the fill counts of a buffer page's nslots sub-buffers (as
 * ss_subbuf_count), each checked against the capacity cap: the info
 * functions report it.
 */
uint64
ss_subbuf_total(Relation rel, BlockNumber blkno, Page page, uint32 nslots,
				uint32 cap)
{
	const uint32 *counts = (const uint32 *) SSPageGetData(page);
	uint64		total = 0;

	for (uint32 s = 0; s < nslots; s++)
	{
		if (counts[s] > cap)
			ss_page_corrupted(rel, blkno,
							  "Sub-buffer %u claims %u entries; its capacity is %u.",
							  s, counts[s], cap);
		total += counts[s];
	}
	return total;
}

/*
 * Block of page p of a stream stored in ext[0..next-1], in order;
 * InvalidBlockNumber past their end.
 */
BlockNumber
ss_extents_block(const SSExtent *ext, uint32 next, uint32 p)
{
	for (uint32 i = 0; i < next; i++)
	{
		if (p < ext[i].npages)
			return ext[i].start + p;
		p -= ext[i].npages;
	}
	return InvalidBlockNumber;
}

/*
 * The stamp of pages an install (made under the metapage's exclusive lock)
 * takes out of a structure: they are reused once the stamp is older than
 * every snapshot (GlobalVisCheckRemovableFullXid).  A reader still on the
 * old version read the metapage before, with a snapshot taken before
 * that.  When the installing transaction has an xid, that xid: it was
 * assigned before the install and is still running, so every such
 * snapshot's xmin is at most it (on a standby too: an xid not seen in WAL
 * yet counts as running once a later one is), and the pages are reusable
 * as soon as that transaction has ended and those readers have.  Else the
 * next xid, which is later than the xmin of every snapshot taken before;
 * but new snapshots have that same xmin until another xid is assigned and
 * ends, so the pages wait for that too.
 */
FullTransactionId
ss_recycle_stamp(void)
{
	FullTransactionId own = GetTopFullTransactionIdIfAny();

	return FullTransactionIdIsValid(own) ? own : ReadNextFullTransactionId();
}

/*
 * A page recycled under a reader (what): on a primary, readers' snapshots
 * hold back every page they can reach, so it is damage; a standby's
 * readers are not in the primary's horizon (without hot_standby_feedback),
 * so there it is a conflict with recovery, and the query can be retried.
 */
void
ss_stale_page(Relation rel, BlockNumber blkno, const char *what)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("canceling statement due to conflict with recovery"),
				 errdetail("Block %u of %s \"%s\" was recycled by the primary while this query read it.",
						   blkno, ss_structure_name(rel), RelationGetRelationName(rel)),
				 errhint("Retry the query, or set hot_standby_feedback on this standby.")));
	ss_page_corrupted(rel, blkno, "%s", what);
}

/* Write a whole page of page_type from area, as one full image. */
void
ss_write_full_page(Relation rel, BlockNumber blkno, uint16 page_type,
				   const char *area)
{
	ss_write_page(rel, blkno, page_type, area, true);
}

/*
 * Pin and exclusively lock block blkno (extending the relation if needed)
 * for a caller that replaces the whole page.  If it logs a full image
 * (full), the block's old contents are not read from disk
 * (RBM_ZERO_AND_LOCK): a run or node written into reused blocks costs a
 * write, not a read and a write.  A block still in shared buffers keeps
 * its old contents until overwritten; one that was not is zeroed, which
 * readers take for a recycled page, as the old contents were (the caller
 * owns the block).  Otherwise the old contents are read: WAL gets what
 * changed.
 */
Buffer
ss_lock_buffer_for_rewrite(Relation rel, BlockNumber blkno, bool full)
{
	return ss_lock_buffer_for_rewrite_with(rel, blkno, full, NULL);
}

/* As ss_lock_buffer_for_rewrite, through the given ring (NULL: none). */
Buffer
ss_lock_buffer_for_rewrite_with(Relation rel, BlockNumber blkno, bool full,
								BufferAccessStrategy strategy)
{
	Buffer		buf;

	ss_extend_to(rel, blkno);
	if (full)
		return ReadBufferExtended(rel, MAIN_FORKNUM, blkno, RBM_ZERO_AND_LOCK,
								  strategy);
	buf = ReadBufferExtended(rel, MAIN_FORKNUM, blkno, RBM_NORMAL, strategy);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	return buf;
}

/*
 * Write page blkno whole, as one WAL record: a page of page_type whose data
 * area holds area's first size bytes (zeros after them), with epoch and
 * applied_pos in its special space.  mode says what WAL gets; strategy
 * is the ring of buffers to go through (NULL: none).
 */
void
ss_write_page_with(Relation rel, BlockNumber blkno, uint16 page_type,
				   const char *area, Size size, uint16 epoch,
				   uint64 applied_pos, SSWriteMode mode,
				   BufferAccessStrategy strategy)
{
	SSXLogState *state;
	Buffer		buf;
	Page		page;
	bool		full_image;

	CHECK_FOR_INTERRUPTS();
	buf = ss_lock_buffer_for_rewrite_with(rel, blkno, mode == SS_WRITE_FULL,
										  strategy);
	full_image = mode == SS_WRITE_FULL ||
		(mode == SS_WRITE_DELTA_OR_NEW && PageIsNew(BufferGetPage(buf)));
	state = ss_xlog_start(rel);
	page = ss_xlog_register(state, buf, full_image ? SS_XLOG_FULL_IMAGE : 0);
	ss_page_init(page, page_type, SS_PAGE_DATA_SIZE);
	SSPageGetOpaque(page)->epoch = epoch;
	SSPageGetOpaque(page)->applied_pos = applied_pos;
	memcpy(SSPageGetData(page), area, size);
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}

/*
 * Write a page of page_type from area; WAL: a full image, or (full false)
 * what changed since the page's last version, which for a page that only
 * grows (appends) is the appended bytes.
 */
void
ss_write_page(Relation rel, BlockNumber blkno, uint16 page_type,
			  const char *area, bool full)
{
	ss_write_page_with(rel, blkno, page_type, area, SS_PAGE_DATA_SIZE, 0, 0,
					   full ? SS_WRITE_FULL : SS_WRITE_DELTA, NULL);
}

/*
 * Page blkno, share-locked, if it is a page of page_type, through the
 * given ring (NULL: none); InvalidBuffer if the block is missing, new or
 * of another type.  A page that is not ours at all is reported as
 * damaged; the caller checks the page (ss_page_check) before it uses it.
 */
Buffer
ss_read_page_of_type(Relation rel, BlockNumber blkno, uint16 page_type,
					 BufferAccessStrategy strategy)
{
	Buffer		buf = ss_read_buffer_with(rel, blkno, strategy);
	Page		page;

	if (!BufferIsValid(buf))
		return InvalidBuffer;
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (!PageIsNew(page))
	{
		SSPageOpaque opaque = SSPageGetOpaque(page);

		if (PageGetSpecialSize(page) != MAXALIGN(sizeof(SSPageOpaqueData)) ||
			opaque->page_id != SS_PAGE_ID)
			ss_page_check(rel, blkno, page, page_type); /* reports it */
		if (opaque->page_type == page_type)
			return buf;
	}
	UnlockReleaseBuffer(buf);
	return InvalidBuffer;
}

/*
 * Copy page blkno's data area into area if it is a page of page_type;
 * false if the block is missing, new or of another type.  A page that is
 * not ours at all is reported as damaged.
 */
bool
ss_read_page_area(Relation rel, BlockNumber blkno, uint16 page_type,
				  char *area)
{
	Buffer		buf = ss_read_page_of_type(rel, blkno, page_type,
										   current_strategy);
	Page		page;

	if (!BufferIsValid(buf))
		return false;
	page = BufferGetPage(buf);
	ss_page_check(rel, blkno, page, page_type);
	memcpy(area, SSPageGetData(page), SS_PAGE_DATA_SIZE);
	UnlockReleaseBuffer(buf);
	return true;
}

/*
 * Copy page blkno's data area into area if it is a page of page_type whose
 * area begins with the uint64 stamp the caller's pointer expects (an
 * install generation, an allocation stamp); false if the block is
 * missing, new, of another type or stamp: it was recycled.  A page that
 * is not ours at all is reported as damaged.
 */
bool
ss_read_stamped_page(Relation rel, BlockNumber blkno, uint16 page_type,
					 uint64 stamp, char *area)
{
	uint64		page_stamp;

	if (!ss_read_page_area(rel, blkno, page_type, area))
		return false;
	memcpy(&page_stamp, area, sizeof(page_stamp));
	return page_stamp == stamp;
}

/*
 * Read rel's metapage contents into meta (ops->meta_size bytes) and
 * validate them with the structure's check_meta.  False if the relation
 * has no metapage (block 0 missing or all zeros).
 */
bool
ss_read_structure_meta(Relation rel, const SSStructure *ops, void *meta)
{
	if (!ss_read_metapage(rel, ops->kind, meta, ops->meta_size))
		return false;
	ss_meta_validate(rel, ops->check_meta, meta);
	return true;
}
