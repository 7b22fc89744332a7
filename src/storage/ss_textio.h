/*-------------------------------------------------------------------------
 *
 * ss_textio.h
 *	  Text input and output helpers shared by the in-memory types (cms,
 *	  qfilter): a small parser with positioned syntax errors, and the key
 *	  type's name in the external forms.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_TEXTIO_H
#define SS_TEXTIO_H

#include "postgres.h"

#include "lib/stringinfo.h"

/* State of a type's text input parser, for errors with a position. */
typedef struct SSTextParser
{
	const char *typname;		/* the type being read, for messages */
	const char *str;			/* whole input */
	const char *p;				/* current position */
} SSTextParser;

extern void ss_text_parser_init(SSTextParser *ps, const char *typname,
								const char *str);
extern int	ss_text_pos(const SSTextParser *ps);
extern void ss_text_syntax_error(const SSTextParser *ps, const char *expected)
			pg_attribute_noreturn();
extern void ss_text_expect(SSTextParser *ps, const char *literal);
extern uint64 ss_text_parse_unsigned(SSTextParser *ps, const char *field,
									 uint64 max);
extern double ss_text_parse_float(SSTextParser *ps, const char *field);
extern char *ss_text_parse_quoted(SSTextParser *ps);

extern char *ss_elemtype_out(Oid elemtype);
extern void ss_text_append_elemtype(StringInfo buf, Oid elemtype);
extern char *ss_text_join(StringInfo hdr, Size datalen, char **data);
extern Oid	ss_elemtype_in(char *name);

#endif							/* SS_TEXTIO_H */
