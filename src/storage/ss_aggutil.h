/*-------------------------------------------------------------------------
 *
 * ss_aggutil.h
 *	  What the in-memory aggregates (cms_agg, qfilter_agg, sample_agg) and
 *	  the functions on their values share: the aggregate context, checked
 *	  transition states, the serialized form of a state that is one varlena,
 *	  and the key type of a value-building call site.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_AGGUTIL_H
#define SS_AGGUTIL_H

#include "fmgr.h"

/* The aggregate memory context, or ERROR if fname is not called as one. */
extern MemoryContext ss_agg_context(FunctionCallInfo fcinfo,
									const char *fname);

/*
 * The state argument argno of an aggregate support function (NULL for a
 * NULL argument), which must start with the uint32 magic.  what names the
 * state in the message ("count-min sketch"), hint lists the support
 * functions that go together.
 */
extern void *ss_agg_state_arg(FunctionCallInfo fcinfo, int argno,
							  uint32 magic, const char *fname,
							  const char *what, const char *hint);

/* A copy of a (plain, 4-byte header) varlena in cxt. */
extern struct varlena *ss_varlena_copy(MemoryContext cxt,
									   const struct varlena *v);

/*
 * A state that is one varlena, serialized: a bytea of magic followed by
 * v's bytes after its varlena header; and back, as a palloc'd varlena
 * with a 4-byte header (not checked beyond its size: the caller checks
 * all of it).  min_size is the smallest value, with its header; what
 * names it in the message ("quotient filter").
 */
extern bytea *ss_agg_serial_varlena(uint32 magic, const struct varlena *v);
extern struct varlena *ss_agg_deserial_varlena(bytea *bytes, uint32 magic,
											   Size min_size,
											   const char *what);

/* How to hash the keys of a call site, cached for its life. */
typedef struct SSKeyType
{
	Oid			typid;			/* InvalidOid before the first key */
	int16		typlen;
	bool		typbyval;
} SSKeyType;

/*
 * Set up kt for keys of typid (once per call site and key type), or
 * ERROR for a key type that cannot be hashed stably; what names the
 * structure in the message ("quotient filter").
 */
extern void ss_key_type_set(SSKeyType *kt, Oid typid, const char *what);

/*
 * The key argument argno converted to elemtype, the key type of the value
 * it is looked up in (none: InvalidOid), with its type in *keytype.
 */
extern Datum ss_lookup_key_arg(FunctionCallInfo fcinfo, int argno,
							   Oid elemtype, const char *typname,
							   const char *what, Oid *keytype);

#endif							/* SS_AGGUTIL_H */
