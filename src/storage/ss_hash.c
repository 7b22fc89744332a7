/*-------------------------------------------------------------------------
 *
 * ss_hash.c
 *	  MurmurHash3 over the binary form of a datum (see ss_hash.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <murmurhash.h>

#include "access/tupmacs.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "ss_hash.h"

SSHash
ss_hash_bytes(const void *data, Size len, uint32 seed)
{
	uint64		out[2];
	SSHash		h;

	if (len > PG_UINT32_MAX)
		elog(ERROR, "key of %zu bytes is too long to hash", len);
	lmmh_x64_128(data, (unsigned int) len, seed, out);
	h.h1 = out[0];
	h.h2 = out[1];
	return h;
}

SSHash
ss_hash_datum(Datum value, int16 typlen, bool typbyval, uint32 seed)
{
	if (typbyval)
	{
		/* the value's own typlen bytes, as they would be stored on disk */
		char		buf[sizeof(Datum)];

		store_att_byval(buf, value, typlen);
		return ss_hash_bytes(buf, typlen, seed);
	}
	else if (typlen > 0)
		return ss_hash_bytes(DatumGetPointer(value), typlen, seed);
	else if (typlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));
		SSHash		h = ss_hash_bytes(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v), seed);

		if ((Pointer) v != DatumGetPointer(value))
			pfree(v);
		return h;
	}
	else
	{
		const char *s = DatumGetCString(value);

		Assert(typlen == -2);
		return ss_hash_bytes(s, strlen(s), seed);
	}
}

static bool
ss_is_integer_type(Oid typid)
{
	return typid == INT2OID || typid == INT4OID || typid == INT8OID;
}

Datum
ss_coerce_key(Datum value, Oid argtype, Oid keytype)
{
	int64		v;

	if (argtype == keytype || IsBinaryCoercible(argtype, keytype))
		return value;

	if (!ss_is_integer_type(argtype) || !ss_is_integer_type(keytype))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("key of type %s does not match the structure's key type %s",
						format_type_be(argtype), format_type_be(keytype)),
				 errdetail("Keys are hashed by their binary form, so a key of another type would never match."),
				 errhint("Cast the key to %s.", format_type_be(keytype))));

	v = argtype == INT2OID ? DatumGetInt16(value) :
		argtype == INT4OID ? DatumGetInt32(value) : DatumGetInt64(value);
	if ((keytype == INT2OID && (v < PG_INT16_MIN || v > PG_INT16_MAX)) ||
		(keytype == INT4OID && (v < PG_INT32_MIN || v > PG_INT32_MAX)))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("key " INT64_FORMAT " is out of range for type %s",
						v, format_type_be(keytype))));
	if (keytype == INT2OID)
		return Int16GetDatum((int16) v);
	if (keytype == INT4OID)
		return Int32GetDatum((int32) v);
	return Int64GetDatum(v);
}
