/*-------------------------------------------------------------------------
 *
 * cbt_test.c
 *	  Standalone test of the compressed buffer tree's block codec
 *	  (src/cbt/cbt_codec.c).
 *
 *	- round trip: random blocks (sorted hashes with runs of equal hashes,
 *	  sizes in runs and alone, compressible and random bytes, with and
 *	  without compression) decode to exactly what was encoded;
 *	- the columns compress as the paper's scheme promises: dense sorted
 *	  hashes take one byte each after the first, equal sizes one run, repetitive
 *	  PAO bytes a fraction of their size; random bytes are stored raw;
 *	- the encoder refuses unsorted hashes and blocks over its limits;
 *	- damaged blocks (bytes flipped, truncated, extended) are refused or
 *	  decode to something that still satisfies every invariant the reader
 *	  relies on, and never touch memory outside the buffers (run it under
 *	  AddressSanitizer with `make -C test/unit sanitize`).
 *
 * Deterministic (fixed seed); exits 1 at the first failure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>
#include <lz4.h>

#include "cbt_codec.h"
#include "unit_test.h"

#undef printf
#undef fprintf

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fprintf(stderr, "\n"); \
			exit(1); \
		} \
	} while (0)

static uint64 rng_state = 0x9e3779b97f4a7c15ULL;

static uint64
rng(void)
{
	return splitmix64(&rng_state);
}

typedef struct Block
{
	uint32		n;
	CbtPaoRef  *paos;
	char	   *bytes;
	Size		raw;
} Block;

/*
 * A block of n PAOs.  dense: hashes close together (a leaf's narrow range);
 * same_size: every PAO the same size (a count per key); text: PAO bytes
 * from a small vocabulary, as group keys and small states are.
 */
static Block
make_block(uint32 n, bool dense, bool same_size, bool text)
{
	Block		b;
	uint64		h = rng() >> 8;
	char	   *p;
	static const char words[][8] = {"/index.h", "/api/v1/", "user    ", "GET     ",
	"200     ", "\x01\x00\x00\x00\x00\x00\x00\x00", "2026-11-"};

	b.n = n;
	b.paos = malloc(sizeof(CbtPaoRef) * n);
	b.raw = 0;
	for (uint32 i = 0; i < n; i++)
	{
		b.paos[i].size = same_size ? 24 : (uint32) (rng() % 200);
		b.raw += b.paos[i].size;
	}
	b.bytes = malloc(b.raw + 1);
	p = b.bytes;
	for (uint32 i = 0; i < n; i++)
	{
		/* runs of equal hashes: colliding keys */
		if (i > 0 && rng() % 16 != 0)
			h += dense ? rng() % 64 : rng() >> 12;
		b.paos[i].hash = h;
		b.paos[i].data = p;
		for (uint32 j = 0; j < b.paos[i].size; j++)
		{
			if (text)
			{
				p[j] = words[(i + j / 8) % lengthof(words)][j % 8];
			}
			else
				p[j] = (char) rng();
		}
		p += b.paos[i].size;
	}
	return b;
}

static void
free_block(Block *b)
{
	free(b->paos);
	free(b->bytes);
}

/* Encode b; returns the block (malloc'd) and its length. */
static char *
encode(const Block *b, bool compress, Size *len)
{
	Size		cap = cbt_block_bound(b->n, b->raw);
	char	   *out = malloc(cap);
	char	   *scratch = malloc(LZ4_compressBound((int) b->raw) + 1);

	*len = cbt_block_encode(b->paos, b->n, compress, out, cap, scratch);
	free(scratch);
	return out;
}

/*
 * Decode in[0..len) as a reader would; returns false if refused.  When
 * accepted, checks the invariants readers rely on.
 */
static bool
decode(const char *in, Size len, CbtBlockHeader *hdr, uint64 **hashes,
	   uint32 **sizes, char **data)
{
	uint64		sum = 0;

	if (!cbt_block_peek(in, len, hdr))
		return false;
	*hashes = malloc(sizeof(uint64) * hdr->npaos);
	*sizes = malloc(sizeof(uint32) * hdr->npaos);
	*data = malloc(hdr->data_raw + 1);
	if (!cbt_block_decode(in, len, hdr, *hashes, *sizes, *data))
	{
		free(*hashes);
		free(*sizes);
		free(*data);
		return false;
	}
	for (uint32 i = 0; i < hdr->npaos; i++)
	{
		CHECK(i == 0 || (*hashes)[i] >= (*hashes)[i - 1], "accepted block has unsorted hashes");
		sum += (*sizes)[i];
	}
	CHECK(sum == hdr->data_raw, "accepted block's sizes add up to %llu, not %u",
		  (unsigned long long) sum, hdr->data_raw);
	return true;
}

static void
test_round_trip(void)
{
	int			blocks = 0;
	Size		raw_total = 0;
	Size		stored_total = 0;

	for (int iter = 0; iter < 400; iter++)
	{
		uint32		n = 1 + (uint32) (rng() % (iter % 10 == 0 ? 3000 : 300));
		bool		dense = iter % 2;
		bool		same = iter % 3 == 0;
		bool		text = iter % 4 < 2;
		bool		compress = iter % 5 != 0;
		Block		b = make_block(n, dense, same, text);
		Size		len;
		char	   *enc = encode(&b, compress, &len);
		CbtBlockHeader hdr;
		uint64	   *hashes;
		uint32	   *sizes;
		char	   *data;
		const char *p;

		if (b.raw > CBT_BLOCK_MAX_RAW)
		{
			CHECK(len == 0, "a block of %zu bytes was encoded", b.raw);
			free(enc);
			free_block(&b);
			continue;
		}
		CHECK(len > 0, "block %d (n %u) was not encoded", iter, n);
		CHECK(decode(enc, len, &hdr, &hashes, &sizes, &data),
			  "block %d does not decode", iter);
		CHECK(hdr.npaos == n && hdr.data_raw == b.raw, "block %d header", iter);
		CHECK(compress || !(hdr.flags & CBT_BLOCK_LZ4), "compressed with compression off");
		p = data;
		for (uint32 i = 0; i < n; i++)
		{
			CHECK(hashes[i] == b.paos[i].hash, "block %d PAO %u hash", iter, i);
			CHECK(sizes[i] == b.paos[i].size, "block %d PAO %u size", iter, i);
			CHECK(memcmp(p, b.paos[i].data, sizes[i]) == 0, "block %d PAO %u bytes", iter, i);
			p += sizes[i];
		}

		/* what each column costs */
		if (dense)
			CHECK(hdr.hash_len <= 10 + (n - 1), "dense hashes took %u bytes for %u", hdr.hash_len, n);
		if (same)
			CHECK(hdr.size_len <= 2 + 3, "equal sizes took %u bytes", hdr.size_len);
		if (text && compress && b.raw >= 4096)
			CHECK(hdr.data_stored * 3 < hdr.data_raw,
				  "repetitive bytes stored in %u of %u", hdr.data_stored, hdr.data_raw);
		if (!text && b.raw > 64)
			CHECK(!(hdr.flags & CBT_BLOCK_LZ4), "random bytes were stored compressed");
		if (compress)
		{
			raw_total += b.raw;
			stored_total += hdr.data_stored;
		}
		blocks++;
		free(hashes);
		free(sizes);
		free(data);
		free(enc);
		free_block(&b);
	}
	printf("round trip: %d blocks, PAO bytes %zu stored in %zu with compression on\n",
		   blocks, raw_total, stored_total);
}

static void
test_refusals(void)
{
	Block		b = make_block(100, true, false, true);
	Size		len;
	char	   *enc;
	uint64		h;

	/* unsorted */
	h = b.paos[10].hash;
	b.paos[10].hash = b.paos[11].hash + 1;
	enc = encode(&b, true, &len);
	CHECK(len == 0, "unsorted hashes were encoded");
	free(enc);
	b.paos[10].hash = h;

	/* empty */
	{
		char		out[64];

		CHECK(cbt_block_encode(b.paos, 0, false, out, sizeof(out), NULL) == 0,
			  "an empty block was encoded");
	}
	/* too little room */
	{
		char	   *out = malloc(16);

		CHECK(cbt_block_encode(b.paos, b.n, false, out, 16, NULL) == 0,
			  "a block was encoded into 16 bytes");
		free(out);
	}
	free_block(&b);

	/* one PAO larger than a block is a block of its own */
	{
		Block		big = make_block(1, false, false, true);
		Size		biglen;
		char	   *bigenc;
		CbtBlockHeader hdr;
		uint64	   *hashes;
		uint32	   *sizes;
		char	   *data;
		char	   *bytes = malloc(3 * CBT_BLOCK_MAX_RAW);

		for (Size i = 0; i < 3 * CBT_BLOCK_MAX_RAW; i++)
			bytes[i] = "state of a large group "[i % 23];
		free(big.bytes);
		big.bytes = bytes;
		big.paos[0].data = bytes;
		big.paos[0].size = 3 * CBT_BLOCK_MAX_RAW;
		big.raw = big.paos[0].size;
		bigenc = encode(&big, true, &biglen);
		CHECK(biglen > 0, "a single large PAO was not encoded");
		CHECK(decode(bigenc, biglen, &hdr, &hashes, &sizes, &data) &&
			  sizes[0] == big.raw && memcmp(data, bytes, big.raw) == 0,
			  "a single large PAO does not round trip");
		free(hashes);
		free(sizes);
		free(data);
		free(bigenc);

		/* two PAOs over the block limit are two blocks */
		{
			CbtPaoRef	two[2] = {{1, CBT_BLOCK_MAX_RAW, bytes},
			{2, CBT_BLOCK_MAX_RAW, bytes}};
			Size		cap = cbt_block_bound(2, 2 * CBT_BLOCK_MAX_RAW);
			char	   *out = malloc(cap);

			CHECK(cbt_block_encode(two, 2, false, out, cap, NULL) == 0,
				  "two PAOs over the block limit were encoded as one block");
			free(out);
		}
		free_block(&big);
	}
	printf("refusals: ok\n");
}

static void
test_damage(void)
{
	int			refused = 0;
	int			accepted = 0;

	for (int iter = 0; iter < 20000; iter++)
	{
		Block		b = make_block(1 + (uint32) (rng() % 200), iter % 2, iter % 3 == 0,
								   iter % 4 < 2);
		Size		len;
		char	   *enc = encode(&b, iter % 5 != 0, &len);
		char	   *bad;
		Size		badlen = len;
		CbtBlockHeader hdr;
		uint64	   *hashes;
		uint32	   *sizes;
		char	   *data;

		CHECK(len > 0, "damage block %d not encoded", iter);
		switch (iter % 4)
		{
			case 0:				/* flip bytes anywhere */
			case 1:
				bad = malloc(len);
				memcpy(bad, enc, len);
				for (int k = 0; k < 1 + iter % 3; k++)
					bad[rng() % len] ^= (char) (1 + rng() % 255);
				break;
			case 2:				/* truncated */
				badlen = rng() % len;
				bad = malloc(badlen + 1);
				memcpy(bad, enc, badlen);
				break;
			default:			/* trailing bytes */
				badlen = len + 1 + rng() % 16;
				bad = malloc(badlen);
				memcpy(bad, enc, len);
				memset(bad + len, 0x5a, badlen - len);
				break;
		}
		if (decode(bad, badlen, &hdr, &hashes, &sizes, &data))
		{
			CHECK(iter % 4 < 2, "a block %s was accepted",
				  iter % 4 == 2 ? "cut short" : "with trailing bytes");
			accepted++;
			free(hashes);
			free(sizes);
			free(data);
		}
		else
			refused++;
		free(bad);
		free(enc);
		free_block(&b);
	}
	printf("damage: %d refused, %d accepted (flips inside PAO bytes are not detectable here)\n",
		   refused, accepted);
}

int
main(void)
{
	test_round_trip();
	test_refusals();
	test_damage();
	printf("cbt_test: all passed\n");
	return 0;
}
