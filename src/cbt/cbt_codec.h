/*-------------------------------------------------------------------------
 *
 * cbt_codec.h
 *	  The column-specialized compression of a compressed buffer tree's
 *	  fragments (Amur et al., SoCC 2013, section 4.2; docs/cbt.md).
 *
 * A fragment's PAOs are stored in blocks.  A block holds the tuples
 * (hash, size, PAO bytes) of a run of PAOs sorted by hash, column by
 * column, each column in the encoding that suits it:
 *
 *	hashes	sorted, so each is written as the varint of its difference to
 *			the previous one (the first: to 0);
 *	sizes	many PAOs have the same size: runs of (size, count) varints;
 *	bytes	the PAOs one after another, LZ4-compressed when that makes them
 *			smaller and compression is on, else as they are.
 *
 * The header says how long each column is, so a reader checks every
 * length against the block before it reads a byte: a block comes from
 * disk, and a damaged one must fail cbt_block_decode, never overrun a
 * buffer (the disk is distrusted, docs/design.md).
 *
 * No function here calls the backend: no palloc, no elog.  Callers own
 * every buffer, sized by cbt_block_bound (encoding) or by the header that
 * cbt_block_peek validated (decoding).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CBT_CODEC_H
#define CBT_CODEC_H

#include "postgres.h"

/*
 * Largest block: PAO bytes before compression and PAOs per block.  A
 * block's raw bytes are allocated whole when it is read, so these bound
 * the memory of every fragment cursor.  One PAO larger than a block (a
 * group whose array_agg state has grown large) is a block of its own, of
 * up to CBT_PAO_MAX_BYTES: reading that group needs its whole state in
 * memory anyway.
 */
#define CBT_BLOCK_MAX_RAW		(256 * 1024)
#define CBT_BLOCK_MAX_PAOS		(64 * 1024)
#define CBT_PAO_MAX_BYTES		(512 * 1024 * 1024)

/* CbtBlockHeader.flags */
#define CBT_BLOCK_LZ4			0x0001	/* PAO bytes are LZ4-compressed */

typedef struct CbtBlockHeader
{
	uint32		npaos;
	uint16		flags;
	uint16		unused;
	uint32		hash_len;		/* bytes of the hash column */
	uint32		size_len;		/* bytes of the size column */
	uint32		data_raw;		/* PAO bytes, uncompressed */
	uint32		data_stored;	/* PAO bytes as stored */
} CbtBlockHeader;

/* One PAO to encode: its key hash, its bytes. */
typedef struct CbtPaoRef
{
	uint64		hash;
	uint32		size;
	const char *data;
} CbtPaoRef;

/* Room a block of n PAOs with data_raw bytes in all may need. */
extern Size cbt_block_bound(uint32 n, Size data_raw);

/*
 * Encode paos[0..n-1] (sorted by hash; 1 <= n <= CBT_BLOCK_MAX_PAOS, at
 * most CBT_BLOCK_MAX_RAW bytes in all, or one PAO of at most
 * CBT_PAO_MAX_BYTES) into out, which has room for
 * cbt_block_bound bytes; lz4_scratch has LZ4_compressBound(data_raw)
 * bytes if compress.  Returns the block's length, or 0 if the PAOs break
 * those limits or are not sorted.
 */
extern Size cbt_block_encode(const CbtPaoRef *paos, uint32 n, bool compress,
							 char *out, Size outcap, char *lz4_scratch);

/* Check a stored block's header against its length; false if damaged. */
extern bool cbt_block_peek(const char *in, Size inlen, CbtBlockHeader *hdr);

/*
 * Decode a block whose header cbt_block_peek accepted into hashes[npaos],
 * sizes[npaos] and data[data_raw]; false if any column is damaged (the
 * hashes must come out sorted, the sizes must add up to data_raw).
 */
extern bool cbt_block_decode(const char *in, Size inlen,
							 const CbtBlockHeader *hdr, uint64 *hashes,
							 uint32 *sizes, char *data);

/*
 * Decode only the hashes[npaos] of such a block (what a lookup needs to
 * know whether the block holds its hash); false if that column is damaged.
 */
extern bool cbt_block_decode_hashes(const char *in, const CbtBlockHeader *hdr,
									uint64 *hashes);

/* ... and the rest of it: sizes[npaos] and data[data_raw]. */
extern bool cbt_block_decode_data(const char *in, Size inlen,
								  const CbtBlockHeader *hdr, uint32 *sizes,
								  char *data);

#endif							/* CBT_CODEC_H */
