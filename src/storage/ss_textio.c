/*-------------------------------------------------------------------------
 *
 * ss_textio.c
 *	  Text input and output helpers shared by the in-memory types.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <math.h>

#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "ss_textio.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

void
ss_text_parser_init(SSTextParser *ps, const char *typname, const char *str)
{
	ps->typname = typname;
	ps->str = ps->p = str;
}

/* The current position as a 1-based character number. */
int
ss_text_pos(const SSTextParser *ps)
{
	return (int) Min(ps->p - ps->str + 1, (ptrdiff_t) PG_INT32_MAX);
}

void
ss_text_syntax_error(const SSTextParser *ps, const char *expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type %s", ps->typname),
			 errdetail("Expected %s at character %d.", expected, ss_text_pos(ps))));
}

void
ss_text_expect(SSTextParser *ps, const char *literal)
{
	size_t		len = strlen(literal);

	if (strncmp(ps->p, literal, len) != 0)
		ss_text_syntax_error(ps, psprintf("\"%s\"", literal));
	ps->p += len;
}

/* An unsigned decimal number no larger than max. */
uint64
ss_text_parse_unsigned(SSTextParser *ps, const char *field, uint64 max)
{
	uint64		v = 0;

	if (!isdigit((unsigned char) *ps->p))
		ss_text_syntax_error(ps, psprintf("an unsigned integer for %s", field));
	while (isdigit((unsigned char) *ps->p))
	{
		int			d = *ps->p - '0';

		if (v > (max - d) / 10)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid input syntax for type %s", ps->typname),
					 errdetail("The value of %s at character %d is out of range.",
							   field, ss_text_pos(ps))));
		v = v * 10 + d;
		ps->p++;
	}
	return v;
}

/*
 * A float8 token running up to the next space.
 *
 * Only the syntax is checked here.  strtod reports ERANGE both for values
 * that have no float8 (overflow to infinity, underflow to zero) and for
 * subnormal results, which are exact float8 values: those are returned, and
 * the type's validation function decides about them exactly as it does for
 * the same value arriving in binary form, so that both inputs accept the
 * same values.
 */
double
ss_text_parse_float(SSTextParser *ps, const char *field)
{
	const char *end = strchr(ps->p, ' ');
	char	   *token;
	char	   *tokend;
	double		v;

	if (end == NULL)
		end = ps->p + strlen(ps->p);
	if (end == ps->p)
		ss_text_syntax_error(ps, psprintf("a number for %s", field));
	token = pnstrdup(ps->p, end - ps->p);
	errno = 0;
	v = strtod(token, &tokend);
	if (*tokend != '\0' || tokend == token ||
		(errno != 0 && !(errno == ERANGE && v != 0.0 && !isinf(v))))
		ss_text_syntax_error(ps, psprintf("a number for %s", field));
	pfree(token);
	ps->p = end;
	return v;
}

/* The key type name in double quotes, with "" standing for ". */
char *
ss_text_parse_quoted(SSTextParser *ps)
{
	StringInfoData buf;

	initStringInfo(&buf);
	ss_text_expect(ps, "\"");
	for (;;)
	{
		if (*ps->p == '\0')
			ss_text_syntax_error(ps, "a closing double quote");
		if (*ps->p == '"')
		{
			if (ps->p[1] != '"')
				break;
			ps->p++;
		}
		appendStringInfoChar(&buf, *ps->p);
		ps->p++;
	}
	ps->p++;
	return buf.data;
}

/*
 * ERROR (sqlerrcode) unless the format version got of an external form is
 * one this build reads, oldest to version; returns got.
 */
static uint32
ss_check_format_version(uint32 got, uint32 oldest, uint32 version,
						const char *what, int sqlerrcode)
{
	if ((got < oldest || got > version) && oldest == version)
		ereport(ERROR,
				(errcode(sqlerrcode),
				 errmsg("unsupported %s format version %u", what, got),
				 errdetail("This version of streamsketch reads format version %d.",
						   (int) version)));
	if (got < oldest || got > version)
		ereport(ERROR,
				(errcode(sqlerrcode),
				 errmsg("unsupported %s format version %u", what, got),
				 errdetail("This version of streamsketch reads format versions %d to %d.",
						   (int) oldest, (int) version)));
	return got;
}

/*
 * The leading "version=<n>" of a text form, which must be oldest to
 * version (what names the type in the message: "count-min sketch");
 * returns it.
 */
uint32
ss_text_parse_version(SSTextParser *ps, uint32 oldest, uint32 version,
					  const char *what)
{
	ss_text_expect(ps, "version=");
	return ss_check_format_version((uint32) ss_text_parse_unsigned(ps, "version",
																   PG_UINT32_MAX),
								   oldest, version, what,
								   ERRCODE_INVALID_TEXT_REPRESENTATION);
}

/*
 * The optional ' type="name"' of a text form (ss_text_append_elemtype):
 * the key type, or InvalidOid without one.
 */
Oid
ss_text_parse_elemtype(SSTextParser *ps)
{
	if (strncmp(ps->p, " type=", 6) != 0)
		return InvalidOid;
	ps->p += 6;
	return ss_elemtype_in(ss_text_parse_quoted(ps));
}

/*
 * The key type's name for the external forms: schema-qualified (so that it
 * does not depend on search_path), or the OID of a dropped type, like
 * regtypeout.  NULL when the value has no key type.
 */
char *
ss_elemtype_out(Oid elemtype)
{
	char	   *name;

	if (!OidIsValid(elemtype))
		return NULL;
	name = format_type_extended(elemtype, -1,
								FORMAT_TYPE_FORCE_QUALIFY |
								FORMAT_TYPE_INVALID_AS_NULL);
	if (name == NULL)
		name = psprintf("%u", elemtype);
	return name;
}

/*
 * Append ' type="name"' (quotes in the name doubled) for a value whose keys
 * have type elemtype; nothing for a value without a key type.
 */
void
ss_text_append_elemtype(StringInfo buf, Oid elemtype)
{
	char	   *tname = ss_elemtype_out(elemtype);

	if (tname == NULL)
		return;
	appendStringInfoString(buf, " type=\"");
	for (const char *s = tname; *s; s++)
	{
		if (*s == '"')
			appendStringInfoChar(buf, '"');
		appendStringInfoChar(buf, *s);
	}
	appendStringInfoChar(buf, '"');
	pfree(tname);
}

/*
 * The output text: hdr (freed) followed by datalen bytes, which the caller
 * writes at *data.  Allocated to the exact size: a StringInfo would round
 * a large text up to MaxAllocSize.  The value's size limit guarantees
 * that the sum fits.
 */
char *
ss_text_join(StringInfo hdr, Size datalen, char **data)
{
	char	   *result;

	Assert(hdr->len + datalen < MaxAllocSize);
	result = palloc(hdr->len + datalen + 1);
	memcpy(result, hdr->data, hdr->len);
	result[hdr->len + datalen] = '\0';
	*data = result + hdr->len;
	pfree(hdr->data);
	return result;
}

/*
 * Inverse of ss_elemtype_out, via regtypein (names or OIDs).  regtypein
 * takes any number as an OID without looking it up, and a value naming a
 * type that does not exist would fail later as an internal error, so the
 * OID is checked here (the output of a value whose type was dropped since
 * can therefore not be read back: there is nothing its keys could match).
 */
Oid
ss_elemtype_in(char *name)
{
	Oid			typid = DatumGetObjectId(DirectFunctionCall1(regtypein,
															 CStringGetDatum(name)));

	if (OidIsValid(typid) &&
		!SearchSysCacheExists1(TYPEOID, ObjectIdGetDatum(typid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("type with OID %u does not exist", typid)));
	return typid;
}

/*
 * The key type travels by name rather than by OID so that values can move
 * between databases where a user-defined key type has another OID.  The
 * buffer is allocated to its exact size up front (buf->maxlen: the varlena
 * header, the head, rest and a terminating byte), so that a large value is
 * not rounded up to MaxAllocSize by the StringInfo's doubling; the caller
 * sends exactly rest bytes more and ends with pq_endtypsend.
 */
void
ss_binary_begin(StringInfo buf, uint32 version, Oid elemtype, Size rest)
{
	char	   *tname;
	char	   *cname = NULL;
	int			cnamelen = 0;

	/* the key type name in the client encoding, as pq_sendcountedtext would */
	tname = ss_elemtype_out(elemtype);
	if (tname)
	{
		cname = pg_server_to_client(tname, strlen(tname));
		cnamelen = strlen(cname);
	}

	buf->maxlen = VARHDRSZ + 2 * sizeof(int32) + cnamelen + rest + 1;
	buf->data = palloc(buf->maxlen);
	buf->len = VARHDRSZ;
	buf->cursor = 0;

	pq_sendint32(buf, version);
	if (tname)
	{
		pq_sendint32(buf, cnamelen);
		pq_sendbytes(buf, cname, cnamelen);
	}
	else
		pq_sendint32(buf, -1);
}

Oid
ss_binary_read_head(StringInfo buf, uint32 oldest, uint32 version,
					const char *what, uint32 *got)
{
	int32		namelen;
	Oid			elemtype = InvalidOid;
	uint32		v;

	v = ss_check_format_version(pq_getmsgint(buf, 4), oldest, version, what,
								ERRCODE_INVALID_BINARY_REPRESENTATION);
	if (got)
		*got = v;
	namelen = (int32) pq_getmsgint(buf, 4);
	if (namelen < -1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid key type name length %d in binary %s",
						namelen, what)));
	if (namelen >= 0)
	{
		int			nbytes;

		elemtype = ss_elemtype_in(pq_getmsgtext(buf, namelen, &nbytes));
	}
	return elemtype;
}
