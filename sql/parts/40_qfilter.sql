
-- ----------------------------------------------------------------------
-- qfilter: in-memory counting quotient filter (src/qfilter*.c)
--
-- A qfilter value is an array of 8160-byte quotient filter areas laid out
-- like the pages of the paged quotient filters, and hashes keys the same
-- way, so the two can be merged.  It grows automatically when full; its
-- size is capped at 2^16 areas (535 MB, so that its text form always fits
-- in 1 GB).  See docs/qfilter.md.
-- ----------------------------------------------------------------------

CREATE TYPE qfilter;

CREATE FUNCTION qfilter_in(input cstring) RETURNS qfilter
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_out(filter qfilter) RETURNS cstring
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_recv(buffer internal) RETURNS qfilter
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_send(filter qfilter) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL SAFE;

CREATE TYPE qfilter (
	INPUT = qfilter_in,
	OUTPUT = qfilter_out,
	RECEIVE = qfilter_recv,
	SEND = qfilter_send,
	INTERNALLENGTH = VARIABLE,
	ALIGNMENT = double,
	STORAGE = extended
);

COMMENT ON TYPE qfilter IS
	'counting quotient filter: approximate membership and multiplicity with no false negatives, deletes, union and resize';
COMMENT ON FUNCTION qfilter_in(cstring) IS 'text input of a quotient filter';
COMMENT ON FUNCTION qfilter_out(qfilter) IS 'text output of a quotient filter';
COMMENT ON FUNCTION qfilter_recv(internal) IS 'binary input of a quotient filter';
COMMENT ON FUNCTION qfilter_send(qfilter) IS 'binary output of a quotient filter';

-- Point queries.  STRICT: a NULL key gives NULL.  The key is anycompatible
-- rather than anyelement so that a bare literal such as 'x' resolves to
-- text instead of failing as an unknown polymorphic type.
CREATE FUNCTION qfilter_contains(filter qfilter, key anycompatible) RETURNS boolean
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION qfilter_contains(qfilter, anycompatible) IS
	'whether a key may have been added: always true for added keys, true with probability about fp_rate for others';
CREATE FUNCTION qfilter_count(filter qfilter, key anycompatible) RETURNS bigint
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION qfilter_count(qfilter, anycompatible) IS
	'copies of a key''s fingerprint: at least the copies added (minus those removed), exact unless another key shares the fingerprint';

-- Modifications return a new value.
CREATE FUNCTION qfilter_remove(filter qfilter, key anycompatible) RETURNS qfilter
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION qfilter_remove(qfilter, anycompatible) IS
	'the filter with one copy of a key removed (only remove keys that were added)';
CREATE FUNCTION qfilter_remove(filter qfilter, key anycompatible,
	count bigint) RETURNS qfilter
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION qfilter_remove(qfilter, anycompatible, bigint) IS
	'the filter with count copies of a key removed, or all if it has fewer';

-- STRICT: a NULL operand gives NULL (qfilter_union_agg skips NULLs instead).
CREATE FUNCTION qfilter_union(a qfilter, b qfilter) RETURNS qfilter
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION qfilter_union(qfilter, qfilter) IS
	'union of two quotient filters with the same fingerprint size (counts add up)';

CREATE FUNCTION qfilter_resize(filter qfilter) RETURNS qfilter
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION qfilter_resize(qfilter) IS
	'the filter with twice the areas: one remainder bit moves to the area index, nothing is rehashed';

CREATE FUNCTION qfilter_info(filter qfilter,
	OUT capacity bigint, OUT fp_rate float8, OUT fingerprint_bits integer,
	OUT rbits integer, OUT slot_bits integer, OUT pages integer,
	OUT items bigint, OUT total bigint, OUT used_slots bigint,
	OUT load float8, OUT false_positive_rate float8,
	OUT current_capacity bigint, OUT bytes bigint, OUT key_type regtype,
	OUT seed bigint)
	RETURNS record
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION qfilter_info(qfilter) IS
	'parameters and contents of a quotient filter: requested capacity and fp_rate, fingerprint layout, areas, distinct fingerprints, total count, used slots, load, false-positive rate for absent keys, keys it holds at 95% load, size, key type and seed';

-- Aggregate support.  The transition state holds a magic word and the
-- filter, kept in the aggregate's memory and serialized as another magic
-- word and the filter's bytes for parallel query; every support function
-- checks the magic word of what it receives.
CREATE FUNCTION qfilter_agg_trans(state internal, key anyelement,
	capacity bigint, fp_rate float8)
	RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_agg_trans(state internal, key anyelement,
	count bigint, capacity bigint, fp_rate float8)
	RETURNS internal
	AS 'MODULE_PATHNAME', 'qfilter_agg_trans_counted'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_union_agg_trans(state internal, filter qfilter) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_agg_combine(state1 internal, state2 internal) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_agg_serial(state internal) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_agg_deserial(bytes bytea, unused internal) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION qfilter_agg_final(state internal) RETURNS qfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION qfilter_agg_trans(internal, anyelement, bigint, float8) IS
	'transition function of qfilter_agg';
COMMENT ON FUNCTION qfilter_agg_trans(internal, anyelement, bigint, bigint, float8) IS
	'transition function of the counting qfilter_agg';
COMMENT ON FUNCTION qfilter_union_agg_trans(internal, qfilter) IS
	'transition function of qfilter_union_agg';
COMMENT ON FUNCTION qfilter_agg_combine(internal, internal) IS
	'combine function of qfilter_agg and qfilter_union_agg';
COMMENT ON FUNCTION qfilter_agg_serial(internal) IS
	'serialization function of qfilter_agg and qfilter_union_agg';
COMMENT ON FUNCTION qfilter_agg_deserial(bytea, internal) IS
	'deserialization function of qfilter_agg and qfilter_union_agg';
COMMENT ON FUNCTION qfilter_agg_final(internal) IS
	'final function of qfilter_agg and qfilter_union_agg';

-- qfilter_agg(key, capacity, fp_rate): rows with a NULL key are skipped;
-- capacity and fp_rate must be non-NULL and the same in every row.  Over no
-- contributing row the result is NULL, like sum().
CREATE AGGREGATE qfilter_agg(key anyelement, capacity bigint, fp_rate float8) (
	SFUNC = qfilter_agg_trans,
	STYPE = internal,
	FINALFUNC = qfilter_agg_final,
	COMBINEFUNC = qfilter_agg_combine,
	SERIALFUNC = qfilter_agg_serial,
	DESERIALFUNC = qfilter_agg_deserial,
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE qfilter_agg(anyelement, bigint, float8) IS
	'quotient filter of the keys, sized for capacity distinct keys at false-positive rate fp_rate (it grows beyond); NULL keys are skipped';

-- qfilter_agg(key, count, capacity, fp_rate): each row adds count (>= 0)
-- copies of its key; rows with a NULL key or a NULL count are skipped, a
-- negative count is an error.
CREATE AGGREGATE qfilter_agg(key anyelement, count bigint,
	capacity bigint, fp_rate float8) (
	SFUNC = qfilter_agg_trans,
	STYPE = internal,
	FINALFUNC = qfilter_agg_final,
	COMBINEFUNC = qfilter_agg_combine,
	SERIALFUNC = qfilter_agg_serial,
	DESERIALFUNC = qfilter_agg_deserial,
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE qfilter_agg(anyelement, bigint, bigint, float8) IS
	'counting quotient filter: each row adds count copies of its key; NULL keys and counts are skipped';

-- qfilter_union_agg(qfilter): union of the non-NULL filters, NULL if none.
CREATE AGGREGATE qfilter_union_agg(filter qfilter) (
	SFUNC = qfilter_union_agg_trans,
	STYPE = internal,
	FINALFUNC = qfilter_agg_final,
	COMBINEFUNC = qfilter_agg_combine,
	SERIALFUNC = qfilter_agg_serial,
	DESERIALFUNC = qfilter_agg_deserial,
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE qfilter_union_agg(qfilter) IS
	'union of quotient filters with the same fingerprint size; NULLs are skipped';
