/*-------------------------------------------------------------------------
 *
 * ss_hash.h
 *	  Key hashing shared by every streamsketch structure.
 *
 * A key is hashed with MurmurHash3 x64/128 (Debian's libmurmurhash) over
 * its binary form: the detoasted bytes of a varlena (without the length
 * header), the typlen bytes of a fixed-length type (by-value types in
 * native byte order), or the bytes of a cstring without its terminator.
 * The in-memory types and the paged structures call the same function, so
 * a key hashes identically in both and their contents can be merged.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_HASH_H
#define SS_HASH_H

#include "postgres.h"

/* Seed used unless a structure is created with an explicit one. */
#define SS_DEFAULT_SEED		0x5eed1e55U

typedef struct SSHash
{
	uint64		h1;				/* selects the page (hash localization) */
	uint64		h2;				/* selects the cells inside the page */
} SSHash;

/* Hash a non-NULL datum of a type with the given typlen/typbyval. */
extern SSHash ss_hash_datum(Datum value, int16 typlen, bool typbyval,
							uint32 seed);

/* Hash raw bytes (used by tests and by multi-part keys). */
extern SSHash ss_hash_bytes(const void *data, Size len, uint32 seed);

/* Map a 64-bit hash uniformly onto [0, n) without division bias. */
static inline uint32
ss_hash_range(uint64 h, uint32 n)
{
	return (uint32) (((unsigned __int128) h * n) >> 64);
}



/*
 * Convert a lookup key of type argtype to the structure's key type.
 * Binary-coercible types pass through; integer types convert between each
 * other (checking the range); anything else is an ERROR with a hint to
 * cast, because hashing a different binary form would silently miss.
 */
extern Datum ss_coerce_key(Datum value, Oid argtype, Oid keytype);
/*
 * The row hashes must be independent: with double hashing (g1 + i*g2) over
 * the few hundred columns of a page, two keys that agree on g1 and g2
 * modulo cols_per_page collide in every row, which happens with
 * probability 1/cols^2 instead of 1/cols^depth.  Each row instead takes a
 * splitmix64 finalizer of h2 and its own odd constant multiple.
 */
static inline uint64
ss_hash_row(uint64 h2, uint32 row)
{
	uint64		x = h2 + (uint64) (row + 1) * UINT64CONST(0x9E3779B97F4A7C15);

	x = (x ^ (x >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	x = (x ^ (x >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return x ^ (x >> 31);
}

#endif							/* SS_HASH_H */
