
/* ---------------------------------------------------------------------
 * bfile: samples (docs/bfile.md); sample_agg, the in-memory sample
 * ------------------------------------------------------------------- */

-- The transition state is the n largest random keys log(U)/weight with
-- their values (src/bfile/sample_agg.c); not STRICT: NULL values and
-- weights are skipped, a NULL sample size is an error (22004).  VOLATILE:
-- each call draws new keys.
CREATE FUNCTION sample_agg_trans(state internal, value anyelement, n int)
	RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION sample_agg_trans(state internal, value anyelement, n int,
	weight float8)
	RETURNS internal
	AS 'MODULE_PATHNAME', 'sample_agg_trans_weighted'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION sample_agg_combine(state1 internal, state2 internal) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION sample_agg_serial(state internal) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION sample_agg_deserial(bytes bytea, unused internal) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION sample_agg_final(state internal, value anyelement, n int)
	RETURNS anyarray
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION sample_agg_final(state internal, value anyelement, n int,
	weight float8)
	RETURNS anyarray
	AS 'MODULE_PATHNAME', 'sample_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION sample_agg_trans(internal, anyelement, int) IS
	'transition function of sample_agg';
COMMENT ON FUNCTION sample_agg_trans(internal, anyelement, int, float8) IS
	'transition function of the weighted sample_agg';

CREATE AGGREGATE sample_agg(value anyelement, n int) (
	SFUNC = sample_agg_trans,
	STYPE = internal,
	FINALFUNC = sample_agg_final,
	FINALFUNC_EXTRA,
	COMBINEFUNC = sample_agg_combine,
	SERIALFUNC = sample_agg_serial,
	DESERIALFUNC = sample_agg_deserial,
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE sample_agg(anyelement, int) IS
	'a uniform random sample of n of the values, without replacement, as an array (NULL values are skipped)';

CREATE AGGREGATE sample_agg(value anyelement, n int, weight float8) (
	SFUNC = sample_agg_trans,
	STYPE = internal,
	FINALFUNC = sample_agg_final,
	FINALFUNC_EXTRA,
	COMBINEFUNC = sample_agg_combine,
	SERIALFUNC = sample_agg_serial,
	DESERIALFUNC = sample_agg_deserial,
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE sample_agg(anyelement, int, float8) IS
	'a weighted random sample of n of the values, without replacement: each draw takes a remaining value with probability proportional to its weight (NULL values and weights are skipped, weight 0 is never drawn)';
