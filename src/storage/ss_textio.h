/*-------------------------------------------------------------------------
 *
 * ss_textio.h
 *	  Text input and output helpers shared by the in-memory types (cms,
 *	  qfilter): a small parser with positioned syntax errors, the key
 *	  type's name in the external forms, and the common head of their
 *	  binary forms.
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
extern uint32 ss_text_parse_version(SSTextParser *ps, uint32 oldest,
									uint32 version, const char *what);
extern Oid	ss_text_parse_elemtype(SSTextParser *ps);

extern char *ss_elemtype_out(Oid elemtype);
extern void ss_text_append_elemtype(StringInfo buf, Oid elemtype);
extern char *ss_text_join(StringInfo hdr, Size datalen, char **data);
extern Oid	ss_elemtype_in(char *name);

/*
 * The binary forms start with int32 version and int32 length of the key
 * type's name (-1 if none), then the name in the client encoding.
 * ss_binary_begin starts a send buffer of exactly that head and rest
 * bytes; ss_binary_read_head reads the head back, a version from oldest
 * to version (in *got unless NULL), and returns the key type (what names
 * the type in messages: "count-min sketch").
 */
extern void ss_binary_begin(StringInfo buf, uint32 version, Oid elemtype,
							Size rest);
extern Oid	ss_binary_read_head(StringInfo buf, uint32 oldest, uint32 version,
								const char *what, uint32 *got);

#endif							/* SS_TEXTIO_H */
