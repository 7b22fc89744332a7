/*-------------------------------------------------------------------------
 *
 * cbt_codec.c
 *	  Blocks of PAOs, column by column (see cbt_codec.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <lz4.h>

#include "cbt_codec.h"

#define VARINT_MAX	10			/* bytes of a 64-bit LEB128 varint */

/* Append v as a little-endian base-128 varint; returns the bytes written. */
static inline Size
varint_put(char *out, uint64 v)
{
	Size		n = 0;

	while (v >= 0x80)
	{
		out[n++] = (char) (v | 0x80);
		v >>= 7;
	}
	out[n++] = (char) v;
	return n;
}

/*
 * Read a varint from [*p, end); false if it runs past end or is longer
 * than a 64-bit value can be.
 */
static inline bool
varint_get(const char **p, const char *end, uint64 *v)
{
	uint64		result = 0;

	for (int shift = 0; shift < 64; shift += 7)
	{
		uint8		b;

		if (*p >= end)
			return false;
		b = (uint8) *(*p)++;
		/* the tenth byte may carry only the top bit of the value */
		if (shift == 63 && b > 1)
			return false;
		result |= (uint64) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
		{
			*v = result;
			return true;
		}
	}
	return false;
}

Size
cbt_block_bound(uint32 n, Size data_raw)
{
	/* every hash a full varint, every size its own run */
	return sizeof(CbtBlockHeader) + (Size) n * VARINT_MAX * 3 + data_raw;
}

Size
cbt_block_encode(const CbtPaoRef *paos, uint32 n, bool compress,
				 char *out, Size outcap, char *lz4_scratch)
{
	CbtBlockHeader hdr;
	char	   *p;
	Size		data_raw = 0;
	uint64		prev = 0;

	if (n == 0 || n > CBT_BLOCK_MAX_PAOS)
		return 0;
	if (n == 1 && paos[0].size > CBT_BLOCK_MAX_RAW)
	{
		if (paos[0].size > CBT_PAO_MAX_BYTES)
			return 0;
		data_raw = paos[0].size;
	}
	else
		for (uint32 i = 0; i < n; i++)
		{
			if (paos[i].size > CBT_BLOCK_MAX_RAW - data_raw ||
				(i > 0 && paos[i].hash < paos[i - 1].hash))
				return 0;
			data_raw += paos[i].size;
		}
	if (outcap < cbt_block_bound(n, data_raw))
		return 0;

	memset(&hdr, 0, sizeof(hdr));
	hdr.npaos = n;
	p = out + sizeof(hdr);

	for (uint32 i = 0; i < n; i++)
	{
		p += varint_put(p, paos[i].hash - prev);
		prev = paos[i].hash;
	}
	hdr.hash_len = (uint32) (p - out - sizeof(hdr));

	for (uint32 i = 0; i < n;)
	{
		uint32		run = 1;

		while (i + run < n && paos[i + run].size == paos[i].size)
			run++;
		p += varint_put(p, paos[i].size);
		p += varint_put(p, run);
		i += run;
	}
	hdr.size_len = (uint32) (p - out - sizeof(hdr)) - hdr.hash_len;

	hdr.data_raw = (uint32) data_raw;
	hdr.data_stored = (uint32) data_raw;
	if (compress && data_raw > 0)
	{
		char	   *raw = p;
		int			clen;

		/* gather the raw bytes where they would go uncompressed */
		for (uint32 i = 0; i < n; i++)
		{
			memcpy(raw, paos[i].data, paos[i].size);
			raw += paos[i].size;
		}
		clen = LZ4_compress_default(p, lz4_scratch, (int) data_raw,
									LZ4_compressBound((int) data_raw));
		if (clen > 0 && (Size) clen < data_raw)
		{
			memcpy(p, lz4_scratch, clen);
			hdr.flags |= CBT_BLOCK_LZ4;
			hdr.data_stored = (uint32) clen;
		}
		p += hdr.data_stored;
	}
	else
	{
		for (uint32 i = 0; i < n; i++)
		{
			memcpy(p, paos[i].data, paos[i].size);
			p += paos[i].size;
		}
	}
	memcpy(out, &hdr, sizeof(hdr));
	return (Size) (p - out);
}

bool
cbt_block_peek(const char *in, Size inlen, CbtBlockHeader *hdr)
{
	uint64		total;

	if (inlen < sizeof(CbtBlockHeader))
		return false;
	memcpy(hdr, in, sizeof(CbtBlockHeader));
	if (hdr->npaos == 0 || hdr->npaos > CBT_BLOCK_MAX_PAOS ||
		hdr->data_raw > (hdr->npaos == 1 ? CBT_PAO_MAX_BYTES : CBT_BLOCK_MAX_RAW) ||
		(hdr->flags & ~CBT_BLOCK_LZ4) != 0 || hdr->unused != 0)
		return false;
	if ((hdr->flags & CBT_BLOCK_LZ4) ?
		(hdr->data_stored == 0 || hdr->data_stored >= hdr->data_raw) :
		hdr->data_stored != hdr->data_raw)
		return false;
	/* each column holds at least one byte per PAO (hashes) or run (sizes) */
	if (hdr->hash_len < hdr->npaos || hdr->size_len < 2)
		return false;
	total = (uint64) sizeof(CbtBlockHeader) + hdr->hash_len + hdr->size_len +
		hdr->data_stored;
	return total == inlen;
}

bool
cbt_block_decode_hashes(const char *in, const CbtBlockHeader *hdr,
						uint64 *hashes)
{
	const char *p = in + sizeof(CbtBlockHeader);
	const char *end = p + hdr->hash_len;
	uint64		h = 0;

	for (uint32 i = 0; i < hdr->npaos; i++)
	{
		uint64		delta;

		if (!varint_get(&p, end, &delta) || delta > PG_UINT64_MAX - h)
			return false;
		h += delta;
		hashes[i] = h;
	}
	return p == end;
}

bool
cbt_block_decode(const char *in, Size inlen, const CbtBlockHeader *hdr,
				 uint64 *hashes, uint32 *sizes, char *data)
{
	return cbt_block_decode_hashes(in, hdr, hashes) &&
		cbt_block_decode_data(in, inlen, hdr, sizes, data);
}

bool
cbt_block_decode_data(const char *in, Size inlen, const CbtBlockHeader *hdr,
					  uint32 *sizes, char *data)
{
	const char *p = in + sizeof(CbtBlockHeader) + hdr->hash_len;
	const char *end;
	uint64		sum = 0;
	uint32		i;

	end = p + hdr->size_len;
	for (i = 0; i < hdr->npaos;)
	{
		uint64		size;
		uint64		run;

		if (!varint_get(&p, end, &size) || !varint_get(&p, end, &run) ||
			run == 0 || run > hdr->npaos - i || size > hdr->data_raw)
			return false;
		for (uint64 r = 0; r < run; r++)
			sizes[i++] = (uint32) size;
		sum += size * run;
		if (sum > hdr->data_raw)
			return false;
	}
	if (p != end || sum != hdr->data_raw)
		return false;

	if (hdr->flags & CBT_BLOCK_LZ4)
	{
		int			got = LZ4_decompress_safe(p, data, (int) hdr->data_stored,
											  (int) hdr->data_raw);

		if (got != (int) hdr->data_raw)
			return false;
	}
	else
		memcpy(data, p, hdr->data_raw);
	return p + hdr->data_stored == in + inlen;
}
