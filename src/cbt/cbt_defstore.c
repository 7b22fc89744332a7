/*-------------------------------------------------------------------------
 *
 * cbt_defstore.c
 *	  A cbt's bound definition in its metapage (CbtMeta.definition).
 *
 * The definition is kept as its analyzed query's node tree, as a view's
 * rule is kept in pg_rewrite: every aggregate, function, operator, type
 * and collation is an object id, so nothing is looked up by name when the
 * table is used, and renames follow.  The tree's text form
 * (nodeToString) is LZ4-compressed behind a header:
 *
 *	magic | tree bytes | stored bytes | CRC-32C | system identifier | LZ4
 *
 * Object ids mean something only in the cluster that assigned them.  A
 * physical copy (standby, base backup, CREATE DATABASE from a template)
 * shares the catalogs and the system identifier; pg_upgrade copies the
 * file into a cluster whose catalogs were restored from a dump, with new
 * ids, and a system identifier of its own.  A tree stamped with another
 * cluster's identifier is therefore not used: the table's label, which the
 * dump restored and pg_upgrade resolved in the new cluster, is
 * (cbt_am.c).  Tables made before definitions were bound hold the text
 * the label also holds; its first byte is never the magic's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <lz4.h>

#include "access/xlog.h"
#include "cbt.h"
#include "cbt_def.h"
#include "nodes/readfuncs.h"
#include "port/pg_crc32c.h"
#include "ss_page.h"

#define CBT_DEF_MAGIC		0x01DEFCB7	/* first byte 0xB7: not text */
#define CBT_DEF_MAX_TREE	(1024 * 1024)	/* bound on what is inflated */

typedef struct CbtStoredDef
{
	uint32		magic;
	uint32		tree_bytes;		/* nodeToString's length */
	uint32		stored_bytes;	/* LZ4 bytes after the header */
	pg_crc32c	crc;			/* of the LZ4 bytes */
	uint64		system_id;		/* of the cluster whose ids it holds */
	char		data[FLEXIBLE_ARRAY_MEMBER];
} CbtStoredDef;

#define CBT_DEF_ROOM	(CBT_DEF_MAX - offsetof(CbtStoredDef, data))

StaticAssertDecl(CBT_DEF_MAX % sizeof(uint64) == 0,
				 "the definition area keeps the header aligned");

/* The header of stored, wherever the bytes are aligned. */
static CbtStoredDef
stored_header(const char *stored)
{
	CbtStoredDef hdr;

	memcpy(&hdr, stored, offsetof(CbtStoredDef, data));
	return hdr;
}

static pg_crc32c
stored_crc(const char *stored, uint32 stored_bytes)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, stored + offsetof(CbtStoredDef, data), stored_bytes);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Store def's bound query into stored (CBT_DEF_MAX bytes); a definition
 * too large for the metapage is refused.
 */
void
cbt_def_store(const CbtDef *def, char *stored)
{
	CbtStoredDef hdr;
	char	   *tree = nodeToString(def->analyzed);
	int			len = (int) strlen(tree);
	int			n;

	memset(stored, 0, CBT_DEF_MAX);
	if (len > CBT_DEF_MAX_TREE)
		n = 0;
	else
		n = LZ4_compress_default(tree, stored + offsetof(CbtStoredDef, data),
								 len, (int) CBT_DEF_ROOM);
	if (n <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the cbt definition is too long"),
				 errdetail("Its bound form takes more than the %zu bytes a cbt keeps in its metapage.",
						   (Size) CBT_DEF_ROOM),
				 errhint("Split the aggregates over several cbt tables.")));
	hdr.magic = CBT_DEF_MAGIC;
	hdr.tree_bytes = (uint32) len;
	hdr.stored_bytes = (uint32) n;
	hdr.crc = stored_crc(stored, hdr.stored_bytes);
	hdr.system_id = GetSystemIdentifier();
	memcpy(stored, &hdr, offsetof(CbtStoredDef, data));
	pfree(tree);
}

CbtDefForm
cbt_def_stored_form(const char *stored)
{
	CbtStoredDef hdr = stored_header(stored);

	if (hdr.magic == CBT_DEF_MAGIC)
		return hdr.system_id == GetSystemIdentifier() ?
			CBT_DEF_BOUND : CBT_DEF_BOUND_ELSEWHERE;
	return stored[0] == '\0' ? CBT_DEF_NONE : CBT_DEF_TEXT;
}

/*
 * The metapage's checks (check_meta): sizes in range and the CRC right,
 * or text that ends.  Errors are reported as the metapage's damage.
 */
void
cbt_def_check_stored(const char *stored)
{
	CbtStoredDef hdr = stored_header(stored);

	if (hdr.magic != CBT_DEF_MAGIC)
	{
		if (memchr(stored, '\0', CBT_DEF_MAX) == NULL)
			elog(ERROR, "the definition is not terminated");
		return;
	}
	if (hdr.stored_bytes == 0 || hdr.stored_bytes > CBT_DEF_ROOM ||
		hdr.tree_bytes == 0 || hdr.tree_bytes > CBT_DEF_MAX_TREE)
		elog(ERROR, "the definition's sizes (%u, %u) are out of range",
			 hdr.stored_bytes, hdr.tree_bytes);
	if (!EQ_CRC32C(hdr.crc, stored_crc(stored, hdr.stored_bytes)))
		elog(ERROR, "the definition's checksum does not match");
}

/* The bound query of a checked, bound definition. */
Query *
cbt_def_stored_tree(const char *stored)
{
	CbtStoredDef hdr = stored_header(stored);
	char	   *tree;
	int			n;
	Node	   *node;

	Assert(hdr.magic == CBT_DEF_MAGIC);
	tree = palloc(hdr.tree_bytes + 1);
	n = LZ4_decompress_safe(stored + offsetof(CbtStoredDef, data), tree,
							(int) hdr.stored_bytes, (int) hdr.tree_bytes);
	if (n != (int) hdr.tree_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the definition in a cbt metapage cannot be read"),
				 errdetail("It inflates to %d bytes instead of %u.",
						   n, hdr.tree_bytes)));
	tree[n] = '\0';
	node = stringToNode(tree);
	pfree(tree);
	if (node == NULL || !IsA(node, Query))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the definition in a cbt metapage is not a query")));
	return (Query *) node;
}
