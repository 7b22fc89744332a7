/*-------------------------------------------------------------------------
 *
 * cbt_combine.c
 *	  A transaction's input rows of a cbt combined per group at commit
 *	  (SSStructure.combine_batch; docs/cbt.md, "Transactions and rounds").
 *
 * The transaction's input rows (SS_PENDING_ITEM records) are folded into
 * their groups' states by the aggregates' transition functions, as a
 * round folds them (CbtGroups), and appended as one PAO per group
 * (SS_PENDING_MERGE, counted: CbtCountedPao), in the order of each group's
 * first row.  A large transaction over few groups then writes (and
 * WAL-logs) a log in proportion to its groups, not its rows.  It is exact:
 * every aggregate of a definition has a combine function (cbt_def.c), and
 * rounds and readers already combine a group's PAOs from any number of
 * fragments and records.
 *
 * The groups held take at most work_mem; beyond it they are appended and
 * the next rows start new ones, so a group may have several PAOs in the
 * batch.  A group inserted with its values (a MERGE record) passes through
 * after the groups before it, so every group meets its rows and PAOs in
 * the order a round would.
 *
 * This runs the aggregates' functions, user code, at pre-commit: as the
 * table's owner, restricted, as a round does (cbt_as_owner), with a run of
 * its own (a round or read that the functions might cause keeps the
 * backend's).  An error fails the COMMIT, as a deferred constraint's does:
 * nothing of the transaction is committed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "cbt_agg.h"
#include "cbt_am.h"
#include "cbt_groups.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

typedef struct Combine
{
	CbtGroups	groups;
	StringInfoData pao;
	StringInfoData rec;
	void		(*emit) (void *arg, const SSPendingHeader *hdr,
						 const void *payload);
	void	   *emit_arg;
	MemoryContext groups_cxt;	/* the groups' slots and arrays */
} Combine;

static void
combine_groups_init(Combine *c, Relation rel, CbtAggRun *run, int nkeys)
{
	MemoryContext old = MemoryContextSwitchTo(c->groups_cxt);

	cbt_groups_init(&c->groups, rel, run, nkeys);
	cbt_groups_index(&c->groups);
	MemoryContextSwitchTo(old);
}

/* Append the groups held, as counted PAOs, and forget them. */
static void
combine_flush(Combine *c)
{
	CbtGroups  *g = &c->groups;
	SSPendingHeader hdr;

	memset(&hdr, 0, sizeof(hdr));
	hdr.relid = RelationGetRelid(g->rel);
	hdr.type = SS_PENDING_MERGE;
	hdr.rows = 1;
	for (int i = 0; i < g->n; i++)
	{
		CbtCountedPao counted;

		memset(&counted, 0, sizeof(counted));
		counted.marker = CBT_COUNTED_PAO_MARKER;
		counted.rows = g->rows[i];
		cbt_groups_pao(g, i, &c->pao);
		resetStringInfo(&c->rec);
		appendBinaryStringInfo(&c->rec, (const char *) &g->hashes[i],
							   sizeof(uint64));
		appendBinaryStringInfo(&c->rec, (const char *) &counted,
							   sizeof(counted));
		appendBinaryStringInfo(&c->rec, c->pao.data, c->pao.len);
		hdr.len = (uint32) c->rec.len;
		c->emit(c->emit_arg, &hdr, c->rec.data);
	}
	/* their slots and arrays too: the next groups start from nothing */
	cbt_groups_free(g);
	MemoryContextReset(c->groups_cxt);
	combine_groups_init(c, g->rel, g->run, g->nkeys);
}

void
cbt_combine_batch(Relation rel, const SSLogSource *src,
				  void (*emit) (void *arg, const SSPendingHeader *hdr,
								const void *payload),
				  void *emit_arg)
{
	const CbtDef *def = cbt_runtime(rel)->def;
	MemoryContext cxt;
	MemoryContext old;
	CbtOwnerSave save;
	CbtAggRun  *run;
	Combine		c;
	SSPendingHeader hdr;
	char	   *payload;
	bool		snapshot = !ActiveSnapshotSet();
	Size		limit;
	uint64		n = 0;

	/* the functions may run queries (SQL functions), as in a statement */
	if (snapshot)
		PushActiveSnapshot(GetTransactionSnapshot());
	cbt_as_owner(rel, &save);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "cbt combine",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	run = cbt_agg_begin(def, cxt);
	memset(&c, 0, sizeof(c));
	c.groups_cxt = AllocSetContextCreate(cxt, "cbt combine groups",
										 ALLOCSET_DEFAULT_SIZES);
	combine_groups_init(&c, rel, run, def->nkeys);
	initStringInfo(&c.pao);
	initStringInfo(&c.rec);
	c.emit = emit;
	c.emit_arg = emit_arg;
	/* work_mem for the groups, beyond what the run itself takes */
	limit = MemoryContextMemAllocated(cxt, true) + (Size) work_mem * 1024;

	for (;;)
	{
		uint64		hash;
		bool		more;

		/* the source's buffers outlive cxt */
		MemoryContextSwitchTo(old);
		more = src->next(src->arg, &hdr, &payload);
		MemoryContextSwitchTo(cxt);
		if (!more)
			break;

		if ((++n & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		if (hdr.len < sizeof(uint64) ||
			(hdr.type != SS_PENDING_ITEM && hdr.type != SS_PENDING_MERGE))
			elog(ERROR, "unexpected pending record of cbt \"%s\"",
				 RelationGetRelationName(rel));
		if (hdr.type == SS_PENDING_MERGE)
		{
			/* after the rows before it, as a round would meet them */
			combine_flush(&c);
			emit(emit_arg, &hdr, payload);
			continue;
		}
		memcpy(&hash, payload, sizeof(hash));
		/* a new group's slot goes with the groups */
		MemoryContextSwitchTo(c.groups_cxt);
		(void) cbt_groups_add_record(&c.groups, hash, false,
									 payload + sizeof(hash),
									 hdr.len - sizeof(hash));
		MemoryContextSwitchTo(cxt);
		/* the keys, states, index and buffers: all in cxt */
		if (MemoryContextMemAllocated(cxt, true) > limit)
			combine_flush(&c);
	}
	combine_flush(&c);
	cbt_groups_free(&c.groups);
	cbt_agg_end(run, true);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	cbt_as_caller(&save);
	if (snapshot)
		PopActiveSnapshot();
}
