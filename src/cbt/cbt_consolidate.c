/*-------------------------------------------------------------------------
 *
 * cbt_consolidate.c
 *	  Consolidation of a cbt: the change log is the root buffer, and a
 *	  round empties it into the tree (Algorithm 1 of the paper;
 *	  docs/cbt.md, "Transactions and rounds").
 *
 * A round collects the committed records after the tree's log position,
 * up to the consolidation memory, and makes a pass of them: sorted by
 * hash, aggregated into one PAO per group (transition functions), written
 * as one fragment appended to the root node.  A node whose buffer is over
 * its limit (bytes, or fragments) is emptied: its fragments merged (PAOs
 * of one group combined), then split (a leaf) or spilled to its children
 * (an internal node), depth first.  Every node a pass changes is written
 * to a new block, and the pass ends with one install: the metapage gets
 * the new root, the tree's log position and the free extents.  A pass
 * that fails leaves the tree as it was.
 *
 * Locking: the caller holds the change log's consolidation lock; pages
 * are read and written one at a time (cbt_store.c), the metapage last.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "cbt.h"
#include "cbt_agg.h"
#include "cbt_groups.h"
#include "cbt_consolidate.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_progress.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* cbt_finalize's phase in streamsketch_progress, counting nodes */
#define CBT_PHASE_FINALIZE	"finalizing tree"

/*
 * A record of the round: its key hash, log position and bytes, an input
 * row's or (a group inserted with its values) a PAO's.
 */
typedef struct RoundRecord
{
	uint64		hash;
	uint64		pos;
	uint32		len;
	bool		pao;
	char	   *row;
} RoundRecord;

/* A node written by a pass, as its parent points to it. */
typedef struct NodeRef
{
	uint64		pivot;			/* the lowest hash it covers */
	BlockNumber blk;
	uint64		generation;
} NodeRef;

/* Write every group of the hash as a PAO, then forget them. */
static void
groups_emit(CbtRound *r, CbtGroups *g, uint64 hash, CbtFragWriter *w)
{
	for (int i = 0; i < g->n; i++)
	{
		cbt_groups_pao(g, i, &r->paobuf);
		cbt_frag_writer_add(w, hash, r->paobuf.data, (uint32) r->paobuf.len);
	}
	cbt_groups_reset(g);
}

/* ---- extents ---- */

/* An extent the round wrote (reachable by no reader before the install). */
static void
note_fresh(CbtRound *r, CbtExtent ext)
{
	if (r->nfresh == r->maxfresh)
	{
		r->maxfresh = Max(64, r->maxfresh * 2);
		r->fresh = r->fresh ?
			repalloc(r->fresh, sizeof(CbtExtent) * r->maxfresh) :
			palloc(sizeof(CbtExtent) * r->maxfresh);
	}
	r->fresh[r->nfresh++] = ext;
}

/*
 * Free an extent: at once reusable if the round wrote it since its last
 * install, else stamped when the install makes it unreachable.
 */
static void
free_extent(CbtRound *r, CbtExtent ext)
{
	FullTransactionId stamp = r->stamp;

	for (uint32 i = 0; i < r->nfresh; i++)
		if (ext.start >= r->fresh[i].start &&
			ext.start + ext.npages <= r->fresh[i].start + r->fresh[i].npages)
		{
			stamp = FullTransactionIdFromU64(FirstNormalTransactionId);
			break;
		}
	cbt_extent_free(&r->free, ext, stamp);
}

/* Apply fn (note_fresh, free_extent) to each extent of a fragment. */
static void
fragment_extents(CbtRound *r, const CbtFragment *f,
				 void (*fn) (CbtRound *r, CbtExtent ext))
{
	CbtExtent	pieces[CBT_FRAG_MAX_PIECES];
	int			n = cbt_frag_pieces(r->rel, f, pieces);

	for (int i = 0; i < n; i++)
		fn(r, pieces[i]);
}

/* ---- a pass over collected records ---- */

static int
record_cmp(const void *a, const void *b)
{
	const RoundRecord *x = (const RoundRecord *) a;
	const RoundRecord *y = (const RoundRecord *) b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/*
 * The pass's records, sorted and aggregated, as one fragment (false if
 * there is none).  Rows of one group meet the transition functions in
 * log order, which is commit order.
 */
static bool
records_fragment(CbtRound *r, CbtFragment *out)
{
	CbtFragWriter w;
	RoundRecord *recs = (RoundRecord *) r->records;
	bool		any;

	qsort(recs, r->nrecords, sizeof(RoundRecord), record_cmp);
	cbt_frag_writer_begin(&w, r->rel, &r->free, r->generation,
						  r->meta.params.compression);
	for (uint64 i = 0; i < r->nrecords; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (i > 0 && recs[i].hash != recs[i - 1].hash)
			groups_emit(r, &r->groups, recs[i - 1].hash, &w);
		r->meta.rows += cbt_groups_add_record(&r->groups, recs[i].hash,
											  recs[i].pao, recs[i].row,
											  recs[i].len);
	}
	if (r->nrecords > 0)
		groups_emit(r, &r->groups, recs[r->nrecords - 1].hash, &w);
	any = cbt_frag_writer_end(&w, out);
	if (any)
		fragment_extents(r, out, note_fresh);
	return any;
}

/* ---- merging fragments ---- */

typedef struct Merge
{
	int			n;
	CbtFragCursor cur[CBT_MAX_FRAGMENTS + 1];
	bool		has[CBT_MAX_FRAGMENTS + 1];
	uint64		hash[CBT_MAX_FRAGMENTS + 1];
	const char *pao[CBT_MAX_FRAGMENTS + 1];
	uint32		size[CBT_MAX_FRAGMENTS + 1];
} Merge;

static void
merge_open(CbtRound *r, Merge *m, const CbtFragment *frags, int n)
{
	m->n = n;
	for (int i = 0; i < n; i++)
	{
		cbt_frag_open(&m->cur[i], r->rel, &frags[i]);
		m->has[i] = cbt_frag_next(&m->cur[i], &m->hash[i], &m->pao[i], &m->size[i]);
	}
}

static void
merge_close(Merge *m)
{
	for (int i = 0; i < m->n; i++)
		cbt_frag_close(&m->cur[i]);
}

/*
 * The next hash's PAOs of every fragment, combined into one PAO per
 * group, go to the writer writer_for chooses; false at the end.  A hash
 * with a single PAO passes through without being decoded.
 */
typedef CbtFragWriter *(*WriterFor) (CbtRound *r, uint64 hash, void *arg);

static bool
merge_next(CbtRound *r, Merge *m, WriterFor writer_for, void *arg)
{
	uint64		h = PG_UINT64_MAX;
	int			count = 0;
	int			only = -1;
	CbtFragWriter *w;

	for (int i = 0; i < m->n; i++)
		if (m->has[i] && (count == 0 || m->hash[i] < h))
		{
			h = m->hash[i];
			count = 1;
			only = i;
		}
		else if (m->has[i] && m->hash[i] == h)
			count++;
	if (count == 0)
		return false;
	CHECK_FOR_INTERRUPTS();
	w = writer_for(r, h, arg);

	/* one PAO of this hash, and no other after it: it passes through */
	if (count == 1)
	{
		uint64		nh;

		if (!cbt_frag_peek_hash(&m->cur[only], &nh) || nh != h)
		{
			cbt_frag_writer_add(w, h, m->pao[only], m->size[only]);
			m->has[only] = cbt_frag_next(&m->cur[only], &m->hash[only],
										 &m->pao[only], &m->size[only]);
			return true;
		}
	}

	/* several PAOs of hash h: group them by key and combine */
	for (int i = 0; i < m->n; i++)
		while (m->has[i] && m->hash[i] == h)
		{
			cbt_groups_add_pao(&r->groups, m->pao[i], m->size[i]);
			m->has[i] = cbt_frag_next(&m->cur[i], &m->hash[i], &m->pao[i],
									  &m->size[i]);
		}
	groups_emit(r, &r->groups, h, w);
	return true;
}

/* ---- nodes ---- */

static uint64
node_stored_bytes(const CbtNode *node)
{
	uint64		total = 0;

	for (uint32 i = 0; i < node->nfragments; i++)
		total += node->fragments[i].stored_bytes;
	return total;
}

/*
 * A node is emptied once its fragments hold more than its share of
 * node_buffer: between half and all of it, by a hash of where its range
 * starts.  Nodes that one stream of uniform keys fills at one rate would
 * otherwise reach one limit in the same round, and that round would
 * rewrite most of the tree; written out of place, the relation must hold
 * the tree and all that the round wrote.
 */
static bool
node_over_limit(CbtRound *r, const CbtNode *node)
{
	uint64		full = (uint64) r->meta.params.node_buffer_kb * 1024;
	uint32		h = murmurhash32((uint32) (node->lo >> 32) ^ (uint32) node->lo ^
								 node->level);

	return node->nfragments >= CBT_MAX_FRAGMENTS ||
		node_stored_bytes(node) > full - (full / 2) * (h >> 16) / 65536;
}

static void
free_fragments(CbtRound *r, CbtNode *node)
{
	for (uint32 i = 0; i < node->nfragments; i++)
	{
		r->meta.fragments--;
		if (node->fragments[i].npieces > 0 && r->meta.fragments_in_pieces > 0)
			r->meta.fragments_in_pieces--;
		r->meta.raw_bytes -= node->fragments[i].raw_bytes;
		r->meta.stored_bytes -= node->fragments[i].stored_bytes;
		fragment_extents(r, &node->fragments[i], free_extent);
	}
	node->nfragments = 0;
}

static void
add_fragment(CbtRound *r, CbtNode *node, const CbtFragment *f)
{
	if (node->nfragments > CBT_MAX_FRAGMENTS)
		elog(ERROR, "cbt node has no room for a fragment");
	node->fragments[node->nfragments++] = *f;
	r->meta.fragments++;
	if (f->npieces > 0)
		r->meta.fragments_in_pieces++;
	r->meta.raw_bytes += f->raw_bytes;
	r->meta.stored_bytes += f->stored_bytes;
}

/* Write node to a new block (freeing oldblk); its reference. */
static NodeRef
write_node(CbtRound *r, CbtNode *node, BlockNumber oldblk)
{
	CbtExtent	ext = cbt_extent_alloc(r->rel, &r->free, 1);
	CbtExtent	old = {oldblk, 1};
	NodeRef		ref;

	note_fresh(r, ext);
	node->generation = r->generation;
	cbt_write_node(r->rel, ext.start, node);
	if (oldblk != InvalidBlockNumber)
		free_extent(r, old);
	else
		r->meta.nodes++;
	ref.pivot = node->lo;
	ref.blk = ext.start;
	ref.generation = r->generation;
	return ref;
}

/* The one writer of a leaf being emptied. */
static CbtFragWriter *
leaf_writer_for(CbtRound *r, uint64 hash, void *arg)
{
	return (CbtFragWriter *) arg;
}

/* Writer per child: the child whose range holds the hash. */
typedef struct Spill
{
	const CbtNode *node;
	CbtFragWriter writers[CBT_MAX_FANOUT];
	bool		open[CBT_MAX_FANOUT];
	uint32		child;			/* the last hash's child */
} Spill;

static CbtFragWriter *
spill_writer_for(CbtRound *r, uint64 hash, void *arg)
{
	Spill	   *sp = (Spill *) arg;

	while (sp->child + 1 < sp->node->nchildren &&
		   hash >= sp->node->pivot[sp->child + 1])
		sp->child++;
	if (!sp->open[sp->child])
	{
		cbt_frag_writer_begin(&sp->writers[sp->child], r->rel, &r->free,
							  r->generation, r->meta.params.compression);
		sp->open[sp->child] = true;
	}
	return &sp->writers[sp->child];
}

static List *empty_node(CbtRound *r, CbtNode *node, BlockNumber oldblk);

/*
 * Replace the children of node (in memory) with the references in refs,
 * splitting node into several when they are more than the fan-out.
 * Returns node's references (one per node it became), written; frees refs.
 */
static List *
pack_children(CbtRound *r, CbtNode *node, BlockNumber oldblk, List *refs)
{
	int			n = list_length(refs);
	int			fanout = (int) r->meta.params.fanout;
	int			nnodes = (n + fanout - 1) / fanout;
	List	   *out = NIL;
	int			at = 0;

	if (n == 0)
		elog(ERROR, "cbt node lost all its children");
	for (int k = 0; k < nnodes; k++)
	{
		int			take = (n - at) / (nnodes - k);
		CbtNode		part = *node;

		part.nchildren = 0;
		part.lo = k == 0 ? node->lo : ((NodeRef *) list_nth(refs, at))->pivot;
		part.hi = k == nnodes - 1 ? node->hi :
			((NodeRef *) list_nth(refs, at + take))->pivot - 1;
		if (k > 0)
			part.nfragments = 0;	/* a split node's buffer is empty */
		for (int i = 0; i < take; i++)
		{
			NodeRef    *c = (NodeRef *) list_nth(refs, at + i);

			part.pivot[i] = i == 0 ? part.lo : c->pivot;
			part.child[i] = c->blk;
			part.child_generation[i] = c->generation;
			part.nchildren++;
		}
		at += take;
		{
			NodeRef    *ref = palloc(sizeof(NodeRef));

			*ref = write_node(r, &part, k == 0 ? oldblk : InvalidBlockNumber);
			out = lappend(out, ref);
		}
	}
	if (nnodes > 1)
		r->meta.splits++;
	list_free_deep(refs);
	return out;
}

/*
 * Empty a leaf: merge its fragments; if they hold more than half a buffer
 * (compressed as the fragments were), split it in as many equal leaves
 * as that takes.
 */
static List *
empty_leaf(CbtRound *r, CbtNode *node, BlockNumber oldblk)
{
	Merge	   *m = palloc0(sizeof(Merge));
	CbtFragWriter *w = palloc0(sizeof(CbtFragWriter));
	CbtFragment *parts = palloc(sizeof(CbtFragment) * CBT_MAX_FANOUT);
	uint64		raw = 0;
	uint64		stored = 0;
	uint64		budget;
	int			nparts;
	List	   *out = NIL;

	for (uint32 i = 0; i < node->nfragments; i++)
	{
		raw += node->fragments[i].raw_bytes;
		stored += node->fragments[i].stored_bytes;
	}
	budget = Max((uint64) 1,
				 (uint64) ((double) r->meta.params.node_buffer_kb * 512 *
						   ((double) raw / (double) Max(stored, 1))));
	cbt_frag_writer_begin(w, r->rel, &r->free, r->generation,
						  r->meta.params.compression);
	merge_open(r, m, node->fragments, (int) node->nfragments);
	while (merge_next(r, m, leaf_writer_for, w))
		;
	merge_close(m);
	pfree(m);
	free_fragments(r, node);
	nparts = cbt_frag_writer_end_split(w, budget, CBT_MAX_FANOUT, parts);
	pfree(w);

	for (int k = 0; k < Max(nparts, 1); k++)
	{
		CbtNode		leaf = *node;
		NodeRef    *ref = palloc(sizeof(NodeRef));

		leaf.nfragments = 0;
		leaf.lo = k == 0 ? node->lo : parts[k].min_hash;
		leaf.hi = k >= nparts - 1 ? node->hi : parts[k + 1].min_hash - 1;
		if (k < nparts)
		{
			fragment_extents(r, &parts[k], note_fresh);
			add_fragment(r, &leaf, &parts[k]);
		}
		*ref = write_node(r, &leaf, k == 0 ? oldblk : InvalidBlockNumber);
		out = lappend(out, ref);
	}
	pfree(parts);
	if (nparts > 1)
		r->meta.splits++;
	return out;
}

/*
 * Empty an internal node: spill its merged fragments to its children,
 * then empty the children that are over their limit.  Returns the
 * references of what node became.
 */
/*
 * Spill an internal node's fragments, merged, into one new fragment per
 * child that gets PAOs (still open in the returned writers).  A child
 * takes its fragment even when its list is full (a node holds one more in
 * memory); it is then emptied before it is written.
 */
static Spill *
spill(CbtRound *r, CbtNode *node)
{
	Merge	   *m = palloc0(sizeof(Merge));
	Spill	   *sp = palloc0(sizeof(Spill));

	sp->node = node;
	merge_open(r, m, node->fragments, (int) node->nfragments);
	while (merge_next(r, m, spill_writer_for, sp))
		;
	merge_close(m);
	pfree(m);
	free_fragments(r, node);
	r->meta.spills++;
	return sp;
}

/* Child i of node, with what the spill gave it; true if it got a fragment. */
static bool
spilled_child(CbtRound *r, CbtNode *node, Spill *sp, uint32 i, CbtNode *child)
{
	CbtFragment f;

	cbt_read_node(r->rel, node->child[i], node->child_generation[i], child);
	if (sp == NULL || !sp->open[i] || !cbt_frag_writer_end(&sp->writers[i], &f))
		return false;
	fragment_extents(r, &f, note_fresh);
	add_fragment(r, child, &f);
	return true;
}

static List *
node_ref(const CbtNode *node, BlockNumber blk)
{
	NodeRef    *ref = palloc(sizeof(NodeRef));

	ref->pivot = node->lo;
	ref->blk = blk;
	ref->generation = node->generation;
	return list_make1(ref);
}

/*
 * Empty an internal node: spill its merged fragments to its children,
 * then empty the children that are over their limit.  Returns the
 * references of what node became.
 */
static List *
empty_internal(CbtRound *r, CbtNode *node, BlockNumber oldblk)
{
	Spill	   *sp = spill(r, node);
	List	   *refs = NIL;
	CbtNode		child;

	for (uint32 i = 0; i < node->nchildren; i++)
	{
		List	   *cr;

		if (!sp->open[i])
		{
			NodeRef    *ref = palloc(sizeof(NodeRef));

			ref->pivot = node->pivot[i];
			ref->blk = node->child[i];
			ref->generation = node->child_generation[i];
			refs = lappend(refs, ref);
			continue;
		}
		if (!spilled_child(r, node, sp, i, &child))
			cr = node_ref(&child, node->child[i]);
		else if (node_over_limit(r, &child))
			cr = empty_node(r, &child, node->child[i]);
		else
		{
			NodeRef    *ref = palloc(sizeof(NodeRef));

			*ref = write_node(r, &child, node->child[i]);
			cr = list_make1(ref);
		}
		/* the first piece keeps the child's lower bound */
		((NodeRef *) linitial(cr))->pivot = node->pivot[i];
		refs = list_concat(refs, cr);
		list_free(cr);
	}
	pfree(sp);
	return pack_children(r, node, oldblk, refs);
}

/*
 * Push every buffer of node's subtree down to its leaves and merge each
 * leaf's fragments into one (cbt_finalize); dirty: node changed in memory.
 * Adds the leaves' PAOs to *groups.  An unchanged subtree keeps its pages.
 */
static List *
finalize_node(CbtRound *r, CbtNode *node, BlockNumber oldblk, bool dirty,
			  int64 *groups)
{
	Spill	   *sp = NULL;
	List	   *refs = NIL;
	bool		changed = dirty;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	/* the metapage's node count is the total, as the tree was */
	ss_progress_report(CBT_PHASE_FINALIZE, "nodes", ++r->finalized,
					   (int64) r->meta.nodes);
	if (node->level == 0)
	{
		List	   *out;

		if (node->nfragments > 1)
			out = empty_leaf(r, node, oldblk);
		else if (dirty)
		{
			NodeRef    *ref = palloc(sizeof(NodeRef));

			*ref = write_node(r, node, oldblk);
			out = list_make1(ref);
		}
		else
			out = node_ref(node, oldblk);
		/* a finalized leaf has at most one fragment, one PAO per group */
		{
			ListCell   *lc;

			foreach(lc, out)
			{
				NodeRef    *ref = (NodeRef *) lfirst(lc);
				CbtNode		leaf;

				cbt_read_node(r->rel, ref->blk, ref->generation, &leaf);
				for (uint32 i = 0; i < leaf.nfragments; i++)
					*groups += (int64) leaf.fragments[i].npaos;
			}
		}
		return out;
	}
	if (node->nfragments > 0)
	{
		sp = spill(r, node);
		changed = true;
	}
	for (uint32 i = 0; i < node->nchildren; i++)
	{
		CbtNode		child;
		bool		got = spilled_child(r, node, sp, i, &child);
		List	   *cr = finalize_node(r, &child, node->child[i], got, groups);

		if (list_length(cr) != 1 ||
			((NodeRef *) linitial(cr))->blk != node->child[i])
			changed = true;
		((NodeRef *) linitial(cr))->pivot = node->pivot[i];
		refs = list_concat(refs, cr);
		list_free(cr);
	}
	if (sp)
		pfree(sp);
	if (!changed)
	{
		list_free_deep(refs);
		return node_ref(node, oldblk);
	}
	return pack_children(r, node, oldblk, refs);
}

static List *
empty_node(CbtRound *r, CbtNode *node, BlockNumber oldblk)
{
	check_stack_depth();
	return node->level == 0 ? empty_leaf(r, node, oldblk) :
		empty_internal(r, node, oldblk);
}

/* ---- passes and installs ---- */

/*
 * Make the round's working tree the table's, in one metapage record.
 *
 * The extents this install frees are stamped here, under the metapage's
 * exclusive lock (ss_recycle_stamp): a reader that still walks the old
 * tree read the metapage before, under its share lock, with a snapshot
 * taken before that, so its xmin is at most the stamp and keeps the
 * extents from reuse (cbt_extent_alloc) for as long as it runs.  A next
 * xid read when the pass began would be older than the xmin of a reader
 * that started during the pass and still read the old tree.
 */
static void
install(CbtRound *r)
{
	SSXLogState *state;
	Buffer		metabuf;
	CbtMeta    *live;

	/* the free list's overflow pages first: no page lock is held */
	cbt_free_list_save(r->rel, &r->free, &r->meta);
	state = ss_xlog_start(r->rel);
	live = (CbtMeta *) ss_meta_register(r->rel, SS_KIND_CBT, state, &metabuf);
	cbt_free_list_stamp(&r->free, &r->meta, ss_recycle_stamp());

	/* the log's part of the metapage is the storage layer's, and live */
	memcpy((char *) live + sizeof(SSMetaHeader),
		   (char *) &r->meta + sizeof(SSMetaHeader),
		   sizeof(CbtMeta) - sizeof(SSMetaHeader));
	ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
	/* what the round wrote is reachable now */
	r->nfresh = 0;
	r->dirty = false;
}

/* The root: what the old root became, under new roots while it split. */
static void
set_root(CbtRound *r, List *refs)
{
	while (list_length(refs) > 1)
	{
		CbtNode		top;

		memset(&top, 0, sizeof(top));
		top.level = r->meta.height++;
		top.lo = 0;
		top.hi = PG_UINT64_MAX;
		refs = pack_children(r, &top, InvalidBlockNumber, refs);
	}
	r->meta.root = ((NodeRef *) linitial(refs))->blk;
	r->meta.root_generation = ((NodeRef *) linitial(refs))->generation;
}

/* Make a pass of the collected records (installed with the round's others). */
static void
make_pass(CbtRound *r)
{
	CbtFragment f;
	CbtNode		root;
	BlockNumber rootblk = r->meta.root;
	List	   *refs;

	if (r->nrecords == 0)
		return;
	r->generation = r->meta.generation + 1;
	r->stamp = CBT_STAMP_PENDING;

	if (rootblk == InvalidBlockNumber)
	{
		memset(&root, 0, sizeof(root));
		root.level = 0;
		root.lo = 0;
		root.hi = PG_UINT64_MAX;
		r->meta.height = 1;
	}
	else
		cbt_read_node(r->rel, rootblk, r->meta.root_generation, &root);

	if (records_fragment(r, &f))
		add_fragment(r, &root, &f);
	if (node_over_limit(r, &root))
		refs = empty_node(r, &root, rootblk);
	else
	{
		NodeRef    *ref = palloc(sizeof(NodeRef));

		*ref = write_node(r, &root, rootblk);
		refs = list_make1(ref);
	}
	set_root(r, refs);
	r->meta.root_generation = r->generation;
	r->meta.generation = r->generation;
	r->meta.tree_pos = r->last_pos + 1;
	r->meta.rounds++;
	r->dirty = true;
	cbt_test_crash(r->rel, CBT_CRASH_PASS_WRITTEN);

	MemoryContextReset(r->pass_cxt);
	r->records = NULL;
	r->nrecords = 0;
	r->maxrecords = 0;
	r->used = 0;
}

/* SSLogRecordFn: collect a committed record; a pass when memory is full. */
static void
round_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
			 void *arg)
{
	CbtRound   *r = (CbtRound *) arg;
	RoundRecord *rec;
	MemoryContext old;

	if (pos < r->meta.tree_pos)
		return;					/* the tree has it (a redone round) */
	if ((hdr->type != SS_PENDING_ITEM && hdr->type != SS_PENDING_MERGE) ||
		hdr->len < sizeof(uint64))
		ss_page_corrupted(r->rel, InvalidBlockNumber,
						  "A change log record of the cbt is damaged.");
	if (r->used + hdr->len + sizeof(RoundRecord) > r->memory && r->nrecords > 0)
		make_pass(r);
	old = MemoryContextSwitchTo(r->pass_cxt);
	if (r->nrecords == r->maxrecords)
	{
		r->maxrecords = Max(1024, r->maxrecords * 2);
		r->records = r->records ?
			repalloc_huge(r->records, sizeof(RoundRecord) * r->maxrecords) :
			palloc_extended(sizeof(RoundRecord) * r->maxrecords, MCXT_ALLOC_HUGE);
	}
	rec = &((RoundRecord *) r->records)[r->nrecords++];
	memcpy(&rec->hash, payload, sizeof(uint64));
	rec->pos = pos;
	rec->len = hdr->len - sizeof(uint64);
	rec->pao = hdr->type == SS_PENDING_MERGE;
	rec->row = palloc(Max(rec->len, 1));
	memcpy(rec->row, payload + sizeof(uint64), rec->len);
	MemoryContextSwitchTo(old);
	r->used += hdr->len + sizeof(RoundRecord);
	r->last_pos = pos;
}

void
cbt_round_begin(CbtRound *r, Relation rel, const CbtMeta *meta,
				CbtAggRun *run, const CbtDef *def)
{
	memset(r, 0, sizeof(*r));
	r->rel = rel;
	r->meta = *meta;
	r->run = run;
	r->def = def;

	/*
	 * A definition bound in another cluster (pg_upgrade copied the file) or
	 * kept as text by an earlier version was resolved from its text by the
	 * runtime: the round installs, if only to store it bound to this
	 * cluster's ids.
	 */
	if (cbt_def_stored_form(r->meta.definition) != CBT_DEF_BOUND)
	{
		cbt_def_store(def, r->meta.definition);
		r->dirty = true;
	}
	cbt_free_list_load(rel, meta, &r->free);
	r->memory = ss_consolidation_memory();
	r->memory = Min(r->memory, (Size) meta->params.root_buffer_kb * 1024);
	r->pass_cxt = AllocSetContextCreate(CurrentMemoryContext, "cbt pass",
										ALLOCSET_DEFAULT_SIZES);
	cbt_groups_init(&r->groups, rel, run, def->nkeys);
	initStringInfo(&r->paobuf);
}

void
cbt_round_records(CbtRound *r, SSConsolidation *c)
{
	ss_cons_foreach(c, round_record, r);
	make_pass(r);
	/* one install for the round's passes (what they freed of each other's is reused at once) */
	if (r->dirty)
		install(r);
	cbt_test_crash(r->rel, CBT_CRASH_INSTALLED);
}

/*
 * cbt_finalize: with every committed record in the tree, push every
 * buffer down to the leaves, and install.  Returns the groups (the
 * leaves' PAOs).
 */
int64
cbt_round_finalize(CbtRound *r)
{
	CbtNode		root;
	List	   *refs;
	int64		groups = 0;

	if (r->meta.root == InvalidBlockNumber)
		return 0;
	r->generation = r->meta.generation + 1;
	r->stamp = CBT_STAMP_PENDING;
	r->nfresh = 0;
	r->finalized = 0;
	ss_progress_report(CBT_PHASE_FINALIZE, "nodes", 0, (int64) r->meta.nodes);
	cbt_read_node(r->rel, r->meta.root, r->meta.root_generation, &root);
	refs = finalize_node(r, &root, r->meta.root, false, &groups);
	if (list_length(refs) == 1 &&
		((NodeRef *) linitial(refs))->blk == r->meta.root)
		return groups;			/* already final */
	set_root(r, refs);
	r->meta.generation = r->generation;
	r->meta.finalizes++;
	r->meta.groups_estimate = groups;
	cbt_test_crash(r->rel, CBT_CRASH_FINALIZE_WRITTEN);
	install(r);
	return groups;
}

void
cbt_round_end(CbtRound *r)
{
	cbt_groups_free(&r->groups);
	MemoryContextDelete(r->pass_cxt);
	pfree(r->paobuf.data);
	pfree(r->free.ext);
}
