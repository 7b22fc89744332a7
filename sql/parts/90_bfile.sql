
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

CREATE FUNCTION bfile_handler(unused internal) RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'bfile_handler' LANGUAGE C;
CREATE ACCESS METHOD bfile TYPE TABLE HANDLER bfile_handler;
COMMENT ON ACCESS METHOD bfile IS 'B-FILE: a random sample (uniform, weighted, age-decayed) of every committed row, kept in the relation''s pages';

-- Not STRICT on purpose: a NULL optional argument means its default (the
-- setting's); a NULL name or columns is an error (22004).
CREATE FUNCTION bfile_create(name text, columns text,
	sample_size "any" DEFAULT NULL, min_fraction float8 DEFAULT NULL,
	buckets int DEFAULT NULL, mode text DEFAULT NULL,
	weight_column text DEFAULT NULL, time_column text DEFAULT NULL,
	unlogged bool DEFAULT false)
RETURNS regclass
AS 'MODULE_PATHNAME', 'bfile_create' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION bfile_create(text, text, "any", float8, int, text, text, text, bool) IS 'create a bfile table: a sample of at most sample_size (rows, or a size such as ''10GB'') of the rows inserted into it';

CREATE FUNCTION bfile_info(sample regclass,
	OUT mode text, OUT sample_size bigint, OUT min_size bigint, OUT size bigint,
	OUT level int, OUT tail_level int, OUT buckets int, OUT bucket_items bigint[],
	OUT tail_items bigint, OUT seen bigint, OUT inclusion_probability float8,
	OUT data_bytes bigint, OUT discards bigint, OUT unrolls bigint,
	OUT unroll_every int, OUT relation_pages bigint, OUT free_pages bigint,
	OUT leaked_pages bigint, OUT added bigint, OUT pages_written bigint,
	OUT sample_bytes bigint, OUT min_bytes bigint,
	OUT pending_records bigint, OUT pending_bytes bigint)
AS 'MODULE_PATHNAME', 'bfile_info' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bfile_info(regclass) IS 'parameters, levels, buckets and counters of a bfile table';

CREATE FUNCTION bfile_flush(sample regclass) RETURNS bigint
AS 'MODULE_PATHNAME', 'bfile_flush' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION bfile_flush(regclass) IS 'draw every committed row of a bfile into its sample now; returns the sample''s size';

-- Not STRICT on purpose: the first argument is NULL (it names the table
-- by its row type); a NULL size is an error (22004).  anycompatible rather
-- than anyelement (here and in bfile_window): the table's name in quotes
-- resolves to text instead of failing in the parser, so the function can
-- say what to write.
CREATE FUNCTION bfile_subsample(sample anycompatible, n bigint)
RETURNS SETOF anycompatible
AS 'MODULE_PATHNAME', 'bfile_subsample' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bfile_subsample(anycompatible, bigint) IS 'a random subsample of exactly n rows of a bfile''s sample (all of it if it is smaller): bfile_subsample(NULL::table, n)';

-- Not STRICT on purpose: the first argument is NULL (it names the table
-- by its row type); NULL bounds are an error (22004).
CREATE FUNCTION bfile_window(sample anycompatible, t1 "any", t2 "any")
RETURNS SETOF anycompatible
AS 'MODULE_PATHNAME', 'bfile_window' LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bfile_window(anycompatible, "any", "any") IS 'the rows of a bfile''s sample whose time (its time column, or the position in the stream) is in [t1, t2], through each bucket''s skip list: bfile_window(NULL::table, t1, t2)';
