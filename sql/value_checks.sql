--
-- value_checks: regression cases for issue 9 ("distrust the disk") on the
-- in-memory types: inputs accept the same values, no allocation before
-- the size is checked against the input, aggregate states carry a magic
-- word, totals saturate.
--

-- Run a statement that must fail and show its SQLSTATE, message and detail
-- (no source locations, which change with every edit).
CREATE FUNCTION vc_error(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL;
	RETURN st || ': ' || msg || coalesce(E'\nDETAIL: ' || nullif(det, ''), '');
END
$$;

-- Binary input from SQL: cms_recv and qfilter_recv take the protocol's
-- buffer, so go through COPY (FORMAT binary) of a one-row file written
-- with lo_export (relative paths are in the data directory).
CREATE TABLE vc_cms (v cms);
CREATE TABLE vc_qf (v qfilter);
CREATE FUNCTION vc_copy_file(b bytea) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	lo oid;
	path text := 'value_checks_' || pg_backend_pid() || '.bin';
BEGIN
	lo := lo_from_bytea(0, '\x5047434f50590aff0d0a00'::bytea	-- signature
						|| '\x0000000000000000'::bytea		-- flags, extension
						|| '\x0001'::bytea || int4send(length(b)) || b
						|| '\xffff'::bytea);
	PERFORM lo_export(lo, path);
	PERFORM lo_unlink(lo);
	RETURN path;
END
$$;
CREATE FUNCTION vc_recv_cms(b bytea) RETURNS cms
LANGUAGE plpgsql AS $$
DECLARE
	r cms;
BEGIN
	DELETE FROM vc_cms;
	EXECUTE format('COPY vc_cms FROM %L (FORMAT binary)', vc_copy_file(b));
	SELECT v INTO r FROM vc_cms;
	RETURN r;
END
$$;
CREATE FUNCTION vc_recv_qfilter(b bytea) RETURNS qfilter
LANGUAGE plpgsql AS $$
DECLARE
	r qfilter;
BEGIN
	DELETE FROM vc_qf;
	EXECUTE format('COPY vc_qf FROM %L (FORMAT binary)', vc_copy_file(b));
	SELECT v INTO r FROM vc_qf;
	RETURN r;
END
$$;

-- Bytes [off, off + length(repl)) of b replaced by repl.
CREATE FUNCTION vc_overlay(b bytea, repl bytea, off int) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
	SELECT overlay(b PLACING repl FROM off + 1 FOR length(repl))
$$;

-- Peak resident memory of this backend in kB (Linux).
CREATE FUNCTION vc_peak_rss_kb() RETURNS bigint
LANGUAGE sql AS $$
	SELECT substring(pg_read_file('/proc/' || pg_backend_pid() || '/status')
					 FROM 'VmHWM:\s*(\d+)')::bigint
$$;

-- Values without a key type, so that the binary header fields sit at fixed
-- offsets: 0 version, 4 name length (-1), then for a cms 8 seed, 12 depth,
-- 16 cols_per_page, 20 pages, 24 epsilon, 32 delta, 40 total, 48 the
-- counters, and for a qfilter 8 seed, 12 rbits, 16 space_mult, 24
-- space_exp, 28 home_slots, 32 pages, 36 area_bytes, 40 capacity, 48
-- fp_rate, 56 total, 64 the areas.
CREATE TABLE vc_base AS
SELECT regexp_replace(cms_agg(i, 0.5, 0.5)::text, ' type="[^"]*"', '')::cms AS c,
	   regexp_replace(qfilter_agg(i, 100, 0.01)::text, ' type="[^"]*"', '')::qfilter AS q
FROM generate_series(1, 10) i;

-- The binary forms round-trip.
SELECT vc_recv_cms(cms_send(c))::text = c::text AS cms_binary_round_trip,
	   vc_recv_qfilter(qfilter_send(q))::text = q::text AS qfilter_binary_round_trip
FROM vc_base;

--
-- 1. A subnormal epsilon, delta or fp_rate: binary input used to accept
-- it, text input rejected it, so such a value could not be restored from
-- a dump.  Both now go through the same check and fail the same way.
--
SELECT vc_error($$SELECT vc_recv_cms(vc_overlay(cms_send(c), '\x0000000000000001', 24)) FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_cms(vc_overlay(cms_send(c), '\x000fffffffffffff', 32)) FROM vc_base$$);
SELECT vc_error($$SELECT replace(c::text, 'epsilon=0.5', 'epsilon=5e-324')::cms FROM vc_base$$);
SELECT vc_error($$SELECT replace(c::text, 'delta=0.5', 'delta=2.2250738585072009e-308')::cms FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_qfilter(vc_overlay(qfilter_send(q), '\x0000000000000001', 48)) FROM vc_base$$);
SELECT vc_error($$SELECT replace(q::text, 'fp_rate=0.01', 'fp_rate=5e-324')::qfilter FROM vc_base$$);
-- the smallest normal number is accepted by both
SELECT (cms_info(replace(c::text, 'epsilon=0.5', 'epsilon=2.2250738585072014e-308')::cms)).epsilon,
	   (cms_info(vc_recv_cms(vc_overlay(cms_send(c), float8send(2.2250738585072014e-308), 24)))).epsilon
FROM vc_base;
-- values that have no float8 at all are a syntax error, as before
SELECT vc_error($$SELECT replace(c::text, 'epsilon=0.5', 'epsilon=1e-400')::cms FROM vc_base$$);
SELECT vc_error($$SELECT replace(q::text, 'fp_rate=0.01', 'fp_rate=1e400')::qfilter FROM vc_base$$);

--
-- 2. A short text asking for a large value fails before allocating it:
-- 80,000 pages of depth 1 are 652 MB, which cms_in used to allocate and
-- zero before finding that the text has one counter.  The peak memory of
-- the backend must not grow by anything near that.
--
SELECT vc_peak_rss_kb() AS rss_before \gset
SELECT vc_error('SELECT ''version=1 seed=1 epsilon=0.5 delta=0.5 depth=1 cols_per_page=1019 pages=80000 total=0 counters=0''::cms');
SELECT octet_length('version=1 seed=1 epsilon=0.5 delta=0.5 depth=1 cols_per_page=1019 pages=80000 total=0 counters=0') AS text_bytes;
-- the same for a qfilter of 2^16 areas (535 MB) with one area in the text
-- (areas of 8136 bytes, the valid size of areas written before they were
-- trimmed to their home slots)
SELECT vc_error($$SELECT replace(replace(replace(q::text, 'pages=1 ', 'pages=65536 '), 'space=13*2^10', 'space=13*2^26'), 'area_bytes=264 ', 'area_bytes=8136 ')::qfilter FROM vc_base$$);
-- and for binary input (which already compared the bytes present)
SELECT vc_error($$SELECT vc_recv_cms(vc_overlay(cms_send(c), int4send(80000), 20)) FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_qfilter(vc_overlay(vc_overlay(vc_overlay(qfilter_send(q), int4send(65536), 32), int4send(26), 24), int4send(8136), 36)) FROM vc_base$$);
-- a trimmed value's areas (264 bytes) under another valid area size (the
-- page-sized 8136) or an invalid one: refused in both forms
SELECT vc_error($$SELECT replace(q::text, 'area_bytes=264 ', 'area_bytes=8136 ')::qfilter FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_qfilter(vc_overlay(qfilter_send(q), int4send(8136), 36)) FROM vc_base$$);
SELECT vc_error($$SELECT replace(q::text, 'area_bytes=264 ', 'area_bytes=288 ')::qfilter FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_qfilter(vc_overlay(qfilter_send(q), int4send(288), 36)) FROM vc_base$$);
SELECT vc_peak_rss_kb() - :rss_before < 100000 AS memory_bounded;
-- a text that does hold all the counters (one run of zeros) is a valid
-- value of that size: the limit is the size of the value, not the text
SELECT pages, bytes FROM cms_info('version=1 seed=1 epsilon=0.5 delta=0.5 depth=1 cols_per_page=1019 pages=10 total=0 counters=.J-e'::cms);

--
-- 3. Aggregate support functions of different aggregates combined with
-- CREATE AGGREGATE (internal states need a superuser) fail cleanly: every
-- function checks the magic word of the state it receives.
--
CREATE AGGREGATE vc_cms_to_qf(anyelement, float8, float8) (
	SFUNC = cms_agg_trans, STYPE = internal, FINALFUNC = qfilter_agg_final);
CREATE AGGREGATE vc_qf_to_cms(anyelement, bigint, float8) (
	SFUNC = qfilter_agg_trans, STYPE = internal, FINALFUNC = cms_agg_final);
CREATE AGGREGATE vc_array_to_cms(anynonarray) (
	SFUNC = array_agg_transfn, STYPE = internal, FINALFUNC = cms_agg_final);
CREATE AGGREGATE vc_string_to_qf(text, text) (
	SFUNC = string_agg_transfn, STYPE = internal, FINALFUNC = qfilter_agg_final);
CREATE AGGREGATE vc_cms_union_qf(cms) (
	SFUNC = cms_union_agg_trans, STYPE = internal, FINALFUNC = qfilter_agg_final);
SELECT vc_error('SELECT vc_cms_to_qf(i, 0.5, 0.5) FROM generate_series(1, 3) i');
SELECT vc_error('SELECT vc_qf_to_cms(i, 100, 0.01) FROM generate_series(1, 3) i');
SELECT vc_error('SELECT vc_array_to_cms(i) FROM generate_series(1, 3) i');
SELECT vc_error($$SELECT vc_string_to_qf(i::text, ',') FROM generate_series(1, 3) i$$);
SELECT vc_error('SELECT vc_cms_union_qf(c) FROM vc_base');
-- the transition functions check the state too (a combine function of
-- the other type is reached in a parallel plan)
CREATE AGGREGATE vc_mixed_trans(anyelement, float8, float8) (
	SFUNC = cms_agg_trans, STYPE = internal, FINALFUNC = cms_agg_final,
	COMBINEFUNC = qfilter_agg_combine, SERIALFUNC = cms_agg_serial,
	DESERIALFUNC = cms_agg_deserial, PARALLEL = SAFE);
CREATE AGGREGATE vc_mixed_serial(anyelement, float8, float8) (
	SFUNC = cms_agg_trans, STYPE = internal, FINALFUNC = cms_agg_final,
	COMBINEFUNC = cms_agg_combine, SERIALFUNC = cms_agg_serial,
	DESERIALFUNC = qfilter_agg_deserial, PARALLEL = SAFE);
CREATE AGGREGATE vc_mixed_serial_qf(anyelement, bigint, float8) (
	SFUNC = qfilter_agg_trans, STYPE = internal, FINALFUNC = qfilter_agg_final,
	COMBINEFUNC = qfilter_agg_combine, SERIALFUNC = qfilter_agg_serial,
	DESERIALFUNC = cms_agg_deserial, PARALLEL = SAFE);
CREATE TABLE vc_rows AS SELECT i FROM generate_series(1, 20000) i;
ANALYZE vc_rows;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
SELECT vc_error('SELECT vc_mixed_trans(i, 0.5, 0.5) FROM vc_rows');
SELECT vc_error('SELECT vc_mixed_serial(i, 0.5, 0.5) FROM vc_rows');
SELECT vc_error('SELECT vc_mixed_serial_qf(i, 100000, 0.01) FROM vc_rows');
-- the real aggregates still run in parallel
SELECT cms_agg(i, 0.5, 0.5)::text = (SELECT cms_agg(i, 0.5, 0.5) FROM generate_series(1, 20000) i)::text AS cms_parallel_ok,
	   qfilter_agg(i, 100000, 0.01)::text = (SELECT qfilter_agg(i, 100000, 0.01) FROM generate_series(1, 20000) i)::text AS qfilter_parallel_ok
FROM vc_rows;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET parallel_leader_participation;

--
-- 4. Totals saturate: three keys of count 2^63-1 (the total of the value
-- saturates at 2^64-1, qfilter_info reports at most 2^63-1), also through
-- unions, and cms totals stop at 2^63-1.
--
SELECT total, items
FROM qfilter_info((SELECT qfilter_agg(k, 9223372036854775807, 100, 0.01)
				   FROM generate_series(1, 3) k));
SELECT total
FROM qfilter_info((SELECT qfilter_agg(k, 9223372036854775807, 100, 0.01)
				   FROM (VALUES (1), (1), (1)) v(k)));
SELECT qfilter_count((SELECT qfilter_agg(k, 9223372036854775807, 100, 0.01)
					  FROM (VALUES (1), (1), (1)) v(k)), 1);
WITH f AS (SELECT qfilter_agg(k, 9223372036854775807, 100, 0.01) AS f
		   FROM generate_series(1, 3) k)
SELECT (qfilter_info(qfilter_union(f, f))).total,
	   substring(qfilter_union(f, f)::text FROM 'total=\d+') AS stored_total
FROM f;
SELECT total
FROM cms_info((SELECT cms_agg(k, 9223372036854775807, 0.5, 0.5)
			   FROM generate_series(1, 3) k));
WITH s AS (SELECT cms_agg(k, 9223372036854775807, 0.5, 0.5) AS s
		   FROM generate_series(1, 3) k)
SELECT (cms_info(cms_union(s, s))).total, cms_estimate(cms_union(s, s), 1)
FROM s;

--
-- 5. Header fields that size or index the value are checked, not asserted:
-- the shape of a qfilter (remainders too wide for its space, a space
-- exponent out of range, too many home slots for an area) and the
-- geometry of a cms.
--
SELECT vc_error($$SELECT regexp_replace(q::text, 'rbits=7', 'rbits=60')::qfilter FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_qfilter(vc_overlay(qfilter_send(q), int4send(256 + 7), 12)) FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_qfilter(vc_overlay(qfilter_send(q), int4send(-1), 24)) FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_qfilter(vc_overlay(qfilter_send(q), int4send(100000), 28)) FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_cms(vc_overlay(cms_send(c), int4send(0), 12)) FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_cms(vc_overlay(cms_send(c), int4send(33), 12)) FROM vc_base$$);
SELECT vc_error($$SELECT vc_recv_cms(vc_overlay(cms_send(c), int4send(1021), 16)) FROM vc_base$$);
