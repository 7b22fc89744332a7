
-- ----------------------------------------------------------------------
-- cms: in-memory count-min sketch (src/cms.c, src/cms_agg.c)
--
-- A cms value has the layout of the sketch pages of a bcms table and
-- hashes keys the same way, so the two can be merged.  Its size is capped
-- at about 660 MB (so that its text form always fits in 1 GB); larger
-- sketches are bcms tables.
-- ----------------------------------------------------------------------

CREATE TYPE cms;

CREATE FUNCTION cms_in(input cstring) RETURNS cms
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION cms_out(sketch cms) RETURNS cstring
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION cms_recv(buffer internal) RETURNS cms
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL SAFE;
CREATE FUNCTION cms_send(sketch cms) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT STABLE PARALLEL SAFE;

CREATE TYPE cms (
	INPUT = cms_in,
	OUTPUT = cms_out,
	RECEIVE = cms_recv,
	SEND = cms_send,
	INTERNALLENGTH = VARIABLE,
	ALIGNMENT = double,
	STORAGE = extended
);

COMMENT ON TYPE cms IS
	'count-min sketch: frequency estimates that never undercount and exceed the true count by more than epsilon times the total with probability at most delta';
COMMENT ON FUNCTION cms_in(cstring) IS 'text input of a count-min sketch';
COMMENT ON FUNCTION cms_out(cms) IS 'text output of a count-min sketch';
COMMENT ON FUNCTION cms_recv(internal) IS 'binary input of a count-min sketch';
COMMENT ON FUNCTION cms_send(cms) IS 'binary output of a count-min sketch';

-- Point query.  STRICT: the estimate of a NULL key is NULL.  The key is
-- anycompatible rather than anyelement so that a bare literal such as 'x'
-- resolves to text instead of failing as an unknown polymorphic type.
CREATE FUNCTION cms_estimate(sketch cms, key anycompatible) RETURNS bigint
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cms_estimate(cms, anycompatible) IS
	'estimated count of a key: at least its true count, and at most epsilon * total more with probability 1 - delta';

-- STRICT: a NULL operand gives NULL (cms_union_agg skips NULLs instead).
CREATE FUNCTION cms_union(a cms, b cms) RETURNS cms
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cms_union(cms, cms) IS
	'sum of two count-min sketches with the same parameters';

CREATE FUNCTION cms_info(sketch cms,
	OUT epsilon float8, OUT delta float8, OUT depth integer,
	OUT width bigint, OUT pages integer, OUT total bigint,
	OUT bytes bigint, OUT key_type regtype, OUT seed bigint)
	RETURNS record
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cms_info(cms) IS
	'parameters of a count-min sketch: requested epsilon and delta, rows (depth), counters per row (width), pages, total count, size in bytes, key type and hash seed';

-- Aggregate support.  The transition state is a magic word and the sketch,
-- kept in the aggregate's memory and serialized as another magic word and
-- the sketch's bytes for parallel query; every support function checks the
-- magic word of what it receives.
CREATE FUNCTION cms_agg_trans(state internal, key anyelement,
	epsilon float8, delta float8)
	RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cms_agg_trans(state internal, key anyelement,
	weight bigint, epsilon float8, delta float8)
	RETURNS internal
	AS 'MODULE_PATHNAME', 'cms_agg_trans_weighted'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cms_union_agg_trans(state internal, sketch cms) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cms_agg_combine(state1 internal, state2 internal) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cms_agg_serial(state internal) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cms_agg_deserial(bytes bytea, unused internal) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cms_agg_final(state internal) RETURNS cms
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION cms_agg_trans(internal, anyelement, float8, float8) IS
	'transition function of cms_agg';
COMMENT ON FUNCTION cms_agg_trans(internal, anyelement, bigint, float8, float8) IS
	'transition function of the weighted cms_agg';
COMMENT ON FUNCTION cms_union_agg_trans(internal, cms) IS
	'transition function of cms_union_agg';
COMMENT ON FUNCTION cms_agg_combine(internal, internal) IS
	'combine function of cms_agg and cms_union_agg';
COMMENT ON FUNCTION cms_agg_serial(internal) IS
	'serialization function of cms_agg and cms_union_agg';
COMMENT ON FUNCTION cms_agg_deserial(bytea, internal) IS
	'deserialization function of cms_agg and cms_union_agg';
COMMENT ON FUNCTION cms_agg_final(internal) IS
	'final function of cms_agg and cms_union_agg';

-- cms_agg(key, epsilon, delta): rows with a NULL key are skipped; epsilon
-- and delta must be non-NULL and the same in every row.  Over no
-- contributing row the result is NULL, like sum().
CREATE AGGREGATE cms_agg(key anyelement, epsilon float8, delta float8) (
	SFUNC = cms_agg_trans,
	STYPE = internal,
	FINALFUNC = cms_agg_final,
	COMBINEFUNC = cms_agg_combine,
	SERIALFUNC = cms_agg_serial,
	DESERIALFUNC = cms_agg_deserial,
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE cms_agg(anyelement, float8, float8) IS
	'count-min sketch of the keys, with error at most epsilon * count with probability 1 - delta; NULL keys are skipped';

-- cms_agg(key, weight, epsilon, delta): each row adds weight (>= 0) to its
-- key; rows with a NULL key or a NULL weight are skipped, a negative
-- weight is an error.
CREATE AGGREGATE cms_agg(key anyelement, weight bigint,
	epsilon float8, delta float8) (
	SFUNC = cms_agg_trans,
	STYPE = internal,
	FINALFUNC = cms_agg_final,
	COMBINEFUNC = cms_agg_combine,
	SERIALFUNC = cms_agg_serial,
	DESERIALFUNC = cms_agg_deserial,
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE cms_agg(anyelement, bigint, float8, float8) IS
	'count-min sketch of the keys weighted by a non-negative weight, with error at most epsilon * total weight with probability 1 - delta; NULL keys and weights are skipped';

-- cms_union_agg(cms): sum of the non-NULL sketches, NULL if there are none.
CREATE AGGREGATE cms_union_agg(sketch cms) (
	SFUNC = cms_union_agg_trans,
	STYPE = internal,
	FINALFUNC = cms_agg_final,
	COMBINEFUNC = cms_agg_combine,
	SERIALFUNC = cms_agg_serial,
	DESERIALFUNC = cms_agg_deserial,
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE cms_union_agg(cms) IS
	'sum of count-min sketches with the same parameters; NULLs are skipped';
