--
-- cms: the in-memory count-min sketch type and its aggregates
--

-- Run a statement that must fail and show its SQLSTATE, message, detail
-- and hint (but no source locations, which change with every edit).
CREATE FUNCTION cms_test_error(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg
		|| coalesce(E'\nDETAIL: ' || nullif(det, ''), '')
		|| coalesce(E'\nHINT: ' || nullif(hnt, ''), '');
END
$$;

-- Did the plan of a query launch parallel workers?
CREATE FUNCTION cms_test_workers_launched(query text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	plan json;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || query INTO plan;
	RETURN (plan::jsonb #> '{0,Plan,Plans,0,Workers Launched}')::int > 0;
END
$$;

--
-- A small sketch: depth ceil(ln 2) = 1, width ceil(e / 0.5) = 6 rounded up
-- to one page of 1019 counters.  The text form lists the parameters and
-- the counters, zero runs compressed.
--
SELECT cms_agg(x, 0.5, 0.5) FROM (VALUES ('a'), ('b'), ('a')) v(x);
SELECT * FROM cms_info((SELECT cms_agg(x, 0.5, 0.5)
						FROM (VALUES ('a'), ('b'), ('a')) v(x)));

-- geometry for a few error bounds
SELECT p.eps, p.del, i.*
FROM (VALUES (0.1, 0.1), (0.01, 0.01), (0.001, 0.001), (0.0001, 0.05))
	 AS p(eps, del),
	 LATERAL (SELECT cms_agg(g, p.eps, p.del) AS s
			  FROM generate_series(1, 100) g) a,
	 LATERAL cms_info(a.s) i;

--
-- Estimates.  Without collisions they are exact; absent keys estimate 0.
--
CREATE TABLE cms_small AS
	SELECT cms_agg(k, 0.01, 0.01) AS s
	FROM (VALUES (1), (2), (2), (3), (3), (3), (NULL), (NULL)) v(k);
SELECT k, cms_estimate(s, k) FROM cms_small, generate_series(0, 4) k;
SELECT (cms_info(s)).total FROM cms_small;		-- NULL keys are skipped
SELECT cms_estimate(s, NULL::int) FROM cms_small;	-- strict

-- Keys of another integer type are converted; others must be cast.
SELECT cms_estimate(s, 3::int2) AS int2, cms_estimate(s, 3::int8) AS int8
FROM cms_small;
SELECT cms_test_error('SELECT cms_estimate(s, 5000000000::int8) FROM cms_small');
SELECT cms_test_error('SELECT cms_estimate(s, ''3''::text) FROM cms_small');
SELECT cms_test_error('SELECT cms_estimate(s, 3.0) FROM cms_small');

-- A bare literal is text; varchar keys match text keys (same binary form).
SELECT cms_estimate(cms_agg(x, 0.1, 0.1), 'b') AS literal,
	   cms_estimate(cms_agg(x, 0.1, 0.1), 'b'::varchar) AS as_varchar
FROM (VALUES ('a'::text), ('b'), ('b')) v(x);

-- Large and toasted keys hash by their detoasted bytes.
SELECT cms_estimate(cms_agg(x, 0.1, 0.1), repeat('xyz', 10000)) AS long_key
FROM (SELECT repeat('xyz', 10000) UNION ALL SELECT 'short') v(x);

--
-- Weighted form
--
SELECT cms_estimate(s, 'a') AS a, cms_estimate(s, 'b') AS b,
	   cms_estimate(s, 'c') AS c, (cms_info(s)).total
FROM (SELECT cms_agg(k, w, 0.01, 0.01) AS s
	  FROM (VALUES ('a', 5), ('b', 2), ('a', 10), ('c', NULL), (NULL, 7),
				   ('c', 0)) v(k, w)) q;
-- only zero weights: an empty sketch, not NULL
SELECT (cms_info(cms_agg(1, 0, 0.1, 0.1))).total;
-- counters and the total saturate instead of wrapping
SELECT cms_estimate(s, 1) AS est, (cms_info(s)).total,
	   s::text::cms::text = s::text AS text_round_trip
FROM (SELECT cms_agg(k, 9223372036854775807, 0.5, 0.5) AS s
	  FROM (VALUES (1), (1), (2)) v(k)) q;
SELECT cms_test_error('SELECT cms_agg(k, -1, 0.1, 0.1) FROM (VALUES (1)) v(k)');

--
-- No contributing row: NULL
--
SELECT cms_agg(k, 0.1, 0.1) IS NULL AS no_rows FROM generate_series(1, 0) k;
SELECT cms_agg(NULL::int, 0.1, 0.1) IS NULL AS null_keys;
SELECT cms_agg(1, NULL::bigint, 0.1, 0.1) IS NULL AS null_weight;
SELECT cms_union_agg(NULL::cms) IS NULL AS null_sketches;

--
-- Parameter errors
--
SELECT cms_test_error('SELECT cms_agg(1, 0, 0.1)');
SELECT cms_test_error('SELECT cms_agg(1, 1, 0.1)');
SELECT cms_test_error('SELECT cms_agg(1, -0.5, 0.1)');
SELECT cms_test_error('SELECT cms_agg(1, ''NaN''::float8, 0.1)');
SELECT cms_test_error('SELECT cms_agg(1, 0.1, 0)');
SELECT cms_test_error('SELECT cms_agg(1, 0.1, 1)');
SELECT cms_test_error('SELECT cms_agg(1, 0.1, 1e-15)');
SELECT cms_test_error('SELECT cms_agg(1, 1e-9, 0.1)');
SELECT cms_test_error('SELECT cms_agg(1, 1e-300, 0.1)');
SELECT cms_test_error('SELECT cms_agg(1, NULL, 0.1)');
SELECT cms_test_error('SELECT cms_agg(1, 2, NULL, 0.1)');
SELECT cms_test_error(
	'SELECT cms_agg(k, CASE WHEN k < 5 THEN 0.1 ELSE 0.2 END, 0.1)
	 FROM generate_series(1, 10) k');
SELECT cms_test_error('SELECT cms_agg(ROW(1, 2), 0.1, 0.1)');
SELECT cms_test_error('SELECT cms_agg(ARRAY[ROW(1, 2)], 0.1, 0.1)');
-- but arrays of scalars are fine
SELECT cms_estimate(cms_agg(a, 0.1, 0.1), ARRAY[1, 2])
FROM (VALUES (ARRAY[1, 2]), (ARRAY[2, 1]), (ARRAY[1, 2])) v(a);

--
-- cms_union and cms_union_agg
--
CREATE TABLE cms_parts AS
	SELECT g % 4 AS part, cms_agg(g % 100, 0.01, 0.01) AS s
	FROM generate_series(1, 10000) g
	GROUP BY g % 4;
SELECT cms_union_agg(s)::text = (SELECT cms_agg(g % 100, 0.01, 0.01)::text
								 FROM generate_series(1, 10000) g) AS same
FROM cms_parts;
SELECT cms_estimate(cms_union(a.s, b.s), 7) AS est,
	   (cms_info(cms_union(a.s, b.s))).total
FROM cms_parts a, cms_parts b
WHERE a.part = 0 AND b.part = 3;
SELECT cms_union(s, NULL) IS NULL AS strict FROM cms_parts WHERE part = 0;
SELECT cms_estimate(cms_union_agg(s), 7)
FROM (SELECT s FROM cms_parts UNION ALL SELECT NULL) q;
-- different epsilon with the same geometry: the weaker bound is kept
SELECT (cms_info(cms_union(a, b))).epsilon,
	   (cms_info(cms_union(b, a))).epsilon,
	   cms_union(a, b)::text = cms_union(b, a)::text AS commutes
FROM (SELECT cms_agg(1, 0.5, 0.5) AS a, cms_agg(1, 0.4, 0.5) AS b) q;
SELECT cms_test_error(
	'SELECT cms_union(cms_agg(1, 0.01, 0.01), cms_agg(1, 0.001, 0.01))');
SELECT cms_test_error(
	'SELECT cms_union(cms_agg(1, 0.1, 0.1), cms_agg(1::bigint, 0.1, 0.1))');
SELECT cms_test_error(
	'SELECT cms_union_agg(s) FROM (SELECT cms_agg(1, 0.1, 0.1)
	 UNION ALL SELECT cms_agg(1, 0.1, 0.01)) v(s)');

--
-- Text I/O
--
SELECT s::text::cms::text = s::text AS round_trip FROM cms_small;
SELECT s::text AS small FROM cms_small \gset
-- a sketch without a key type (written by hand) estimates any key type
SELECT cms_estimate(c, 1) AS int_key, cms_estimate(c, 'x') AS text_key,
	   (cms_info(c)).key_type, c::text = replace(:'small', ' type="integer"', '')
FROM (SELECT replace(:'small', ' type="integer"', '')::cms AS c) q;
-- a key type with quotes and spaces in its name survives the round trip
CREATE TYPE "odd ""key"" type" AS ENUM ('x', 'y');
-- (enum values hash by OID, which differs between runs: no counters shown)
SELECT split_part(s::text, ' counters=', 1) AS header,
	   s::text::cms::text = s::text AS round_trip
FROM (SELECT cms_agg(e, 0.5, 0.5) AS s
	  FROM (VALUES ('x'::"odd ""key"" type")) v(e)) q;
-- bad input
SELECT cms_test_error('SELECT ''garbage''::cms');
SELECT cms_test_error('SELECT ''''::cms');
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'version=1', 'version=2')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'seed=', 'seed=-')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'seed=', 'seed=99999999999')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'epsilon=0.01', 'epsilon=x')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'epsilon=0.01', 'epsilon=0')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'delta=0.01', 'delta=NaN')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'depth=5', 'depth=0')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'depth=5', 'depth=33')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'cols_per_page=203', 'cols_per_page=204')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'pages=2', 'pages=4000000000')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'pages=2', 'pages=3')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'pages=2', 'pages=1')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'total=6', 'total=2')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'total=6', 'total=5')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', 'integer', 'no_such_type')));
SELECT cms_test_error(format('SELECT %L::cms', replace(:'small', '"integer"', '"integer')));
SELECT cms_test_error(format('SELECT %L::cms', :'small' || '1'));
SELECT cms_test_error(format('SELECT %L::cms', :'small' || '!'));
SELECT cms_test_error(format('SELECT %L::cms', :'small' || 'A'));
SELECT cms_test_error(format('SELECT %L::cms', :'small' || '.'));
SELECT cms_test_error(format('SELECT %L::cms', :'small' || ' '));
SELECT cms_test_error(format('SELECT %L::cms', regexp_replace(:'small', 'counters=.*', 'counters=.B0')));
SELECT cms_test_error(format('SELECT %L::cms', regexp_replace(:'small', 'counters=.*', 'counters=.Z_v')));
SELECT cms_test_error(format('SELECT %L::cms', regexp_replace(:'small', 'counters=.*', 'counters=IAAAAAAAAAAA0')));

--
-- Binary I/O, through COPY (FORMAT binary) via a server-side file
--
SELECT length(cms_send(s)) AS send_bytes, (cms_info(s)).bytes FROM cms_small;
SELECT '/tmp/streamsketch_cms_regress_' || pg_backend_pid() || '.copy' AS copyfile
\gset
\set rmcmd 'rm -f ' :copyfile
CREATE TABLE cms_back (s cms);
COPY (SELECT s FROM cms_small) TO :'copyfile' WITH (FORMAT binary);
COPY cms_back FROM :'copyfile' WITH (FORMAT binary);
SELECT b.s::text = s.s::text AS binary_round_trip FROM cms_back b, cms_small s;
-- a sketch without key type
TRUNCATE cms_back;
COPY (SELECT replace(:'small', ' type="integer"', '')::cms) TO :'copyfile' WITH (FORMAT binary);
COPY cms_back FROM :'copyfile' WITH (FORMAT binary);
SELECT (cms_info(s)).key_type IS NULL AS no_key_type, cms_estimate(s, 3)
FROM cms_back;
-- bad input: a bytea column's binary form is its raw bytes, so writing
-- altered cms_send() output and reading it as cms feeds them to cms_recv
CREATE FUNCTION cms_test_recv(bytes bytea, copyfile text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('COPY (SELECT %L::bytea) TO %L WITH (FORMAT binary)',
				   bytes, copyfile);
	RETURN cms_test_error(format('COPY cms_back FROM %L WITH (FORMAT binary)',
								 copyfile));
END
$$;
-- header: version 4, name length 4, "integer" 7, seed/depth/cols/pages 16,
-- epsilon/delta 16, total 8: the counters start at byte 56
SELECT cms_test_recv(overlay(cms_send(s) PLACING '\x00000002' FROM 1), :'copyfile')
FROM cms_small;
SELECT cms_test_recv(overlay(cms_send(s) PLACING '\xfffffffe' FROM 5), :'copyfile')
FROM cms_small;
SELECT cms_test_recv(overlay(cms_send(s) PLACING '\x00000006' FROM 24), :'copyfile')
FROM cms_small;
SELECT cms_test_recv(substr(cms_send(s), 1, 100), :'copyfile') FROM cms_small;
SELECT cms_test_recv(substr(cms_send(s), 1, 30), :'copyfile') FROM cms_small;
SELECT cms_test_recv(cms_send(s) || '\x00'::bytea, :'copyfile') FROM cms_small;
SELECT cms_test_recv(overlay(cms_send(s) PLACING '\xffffffffffffffff' FROM 56), :'copyfile')
FROM cms_small;
COPY (SELECT 1 WHERE false) TO PROGRAM :'rmcmd';

--
-- Stored values are toasted and compressed, and read back identically.
--
CREATE TABLE cms_store AS
	SELECT cms_agg(g % 1000, 0.0001, 0.01) AS s FROM generate_series(1, 100000) g;
SELECT (cms_info(s)).bytes, pg_column_size(s) < (cms_info(s)).bytes / 10 AS compressed,
	   cms_estimate(s, 5) >= 100 AS est,
	   s::text = (SELECT cms_agg(g % 1000, 0.0001, 0.01)::text
				  FROM generate_series(1, 100000) g) AS same
FROM cms_store;

--
-- cms_estimate detoasts a stored sketch once per call site, not once per
-- call.  Compare estimates from stored sketches (external TOAST pointers
-- and inline compressed values), with a work_mem small enough to force
-- evictions, against estimates from plain in-memory copies.
--
CREATE TABLE cms_stored AS
	SELECT eps, cms_agg(g % 5000, eps, 0.01) AS s
	FROM (VALUES (0.5), (0.01), (0.001), (0.0005)) p(eps),
		 generate_series(1, 50000) g
	GROUP BY eps;
SELECT eps, (cms_info(s)).bytes, pg_column_size(s) < 2000 AS inline
FROM cms_stored ORDER BY eps;
SET work_mem = '64kB';
WITH plain AS MATERIALIZED (SELECT eps, s::text::cms AS s FROM cms_stored),
	 keys AS (SELECT k FROM generate_series(0, 5100) k),
	 expected AS (SELECT eps, k, cms_estimate(s, k) AS e FROM plain, keys)
SELECT
	(SELECT count(*) FROM expected) AS estimates,
	(SELECT count(*) FROM (SELECT eps, k, cms_estimate(s, k) FROM cms_stored, keys
						   EXCEPT SELECT * FROM expected) d) AS diff_sketch_outer,
	(SELECT count(*) FROM (SELECT q.* FROM keys,
								LATERAL (SELECT eps, k, cms_estimate(s, k)
										 FROM cms_stored) q
						   EXCEPT SELECT * FROM expected) d) AS diff_key_outer,
	(SELECT count(*) FROM (SELECT 0.001, k, cms_estimate((SELECT s FROM cms_stored
														  WHERE eps = 0.001), k)
						   FROM keys
						   EXCEPT SELECT * FROM expected) d) AS diff_subquery;
RESET work_mem;
-- a changed value under the same call site is not served from the cache
DO $$
DECLARE
	sk cms;
BEGIN
	FOR i IN 1..3 LOOP
		UPDATE cms_stored SET s = cms_union(s, (SELECT cms_agg(1, 0.001, 0.01)))
		WHERE eps = 0.001;
		SELECT st.s INTO sk FROM cms_stored st WHERE eps = 0.001;
		RAISE NOTICE 'estimate of 1: %', cms_estimate(sk, 1);
	END LOOP;
END
$$;

--
-- Grouped and window aggregation
--
SELECT g % 3 AS grp, cms_estimate(cms_agg(g % 7, 0.1, 0.1), 0) AS est_0
FROM generate_series(1, 210) g
GROUP BY g % 3 ORDER BY 1;
-- a growing frame finalizes the same state again and again
SELECT g, cms_estimate(cms_agg(g % 2, 0.5, 0.5) OVER (ORDER BY g), 1) AS running
FROM generate_series(1, 5) g;
SELECT g, cms_estimate(cms_agg(g % 2, 0.5, 0.5)
						 OVER (ORDER BY g ROWS BETWEEN 1 PRECEDING AND CURRENT ROW), 1) AS moving
FROM generate_series(1, 5) g;

--
-- Error bound on 10^6 Zipf(1)-distributed keys: exp(U * ln 10^6) is
-- log-uniform on [1, 10^6), so the frequency of key k is about
-- 1 / (k ln 10^6).  Every estimate must be at least the true count, and
-- the share of keys overestimated by more than epsilon * n at most delta.
--
SELECT setseed(0.5);
CREATE TABLE cms_zipf AS
	SELECT k,
		   CASE WHEN k % 11 <> 0 THEN k END AS nk,	-- some NULL keys
		   k % 5 AS w, k % 3 AS g
	FROM (SELECT floor(exp(random() * ln(1000000)))::int AS k
		  FROM generate_series(1, 1000000)) z;
VACUUM ANALYZE cms_zipf;
WITH sketch AS MATERIALIZED (
		SELECT eps, delta, cms_agg(k, eps, delta) AS s
		FROM (VALUES (0.001, 0.01), (0.01, 0.1)) p(eps, delta), cms_zipf
		GROUP BY eps, delta),
	truth AS (SELECT k, count(*) AS c FROM cms_zipf GROUP BY k),
	est AS (SELECT eps, delta, c, cms_estimate(s, k) AS e
			FROM sketch, truth)
SELECT eps, delta, count(*) AS keys, sum(c) AS n,
	   bool_and(e >= c) AS never_under,
	   count(*) FILTER (WHERE e > c) > 0 AS some_over,
	   count(*) FILTER (WHERE e - c > eps * 1000000)::float8 / count(*) <= delta
		   AS within_delta
FROM est
GROUP BY eps, delta ORDER BY eps;

--
-- Parallel aggregation gives the same sketches as serial aggregation.
-- Without leader participation the partial states come from the workers
-- and pass through serialization.
--
CREATE TABLE cms_zipf_parts AS
	SELECT g, cms_agg(k, 0.01, 0.01) AS s FROM cms_zipf GROUP BY g;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT cms_agg(nk, 0.01, 0.01) FROM cms_zipf;
EXPLAIN (COSTS OFF) SELECT cms_agg(nk, w, 0.01, 0.01) FROM cms_zipf;
EXPLAIN (COSTS OFF) SELECT cms_union_agg(s) FROM cms_zipf_parts;
EXPLAIN (COSTS OFF) SELECT g, cms_agg(nk, 0.01, 0.01) FROM cms_zipf GROUP BY g;
SELECT cms_test_workers_launched('SELECT cms_agg(nk, 0.01, 0.01) FROM cms_zipf');
SELECT md5(cms_agg(nk, 0.01, 0.01)::text) AS par1,
	   md5(cms_agg(nk, w, 0.01, 0.01)::text) AS par2
FROM cms_zipf \gset
SELECT md5(cms_union_agg(s)::text) AS par3 FROM cms_zipf_parts \gset
SELECT md5(string_agg(g || ':' || coalesce(s::text, 'NULL'), ',' ORDER BY g)) AS par4
FROM (SELECT g, cms_agg(nk, 0.01, 0.01) AS s
	  FROM cms_zipf WHERE g < 2 OR nk IS NULL GROUP BY g) q \gset
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT cms_agg(nk, 0.01, 0.01) FROM cms_zipf;
SELECT md5(cms_agg(nk, 0.01, 0.01)::text) = :'par1' AS same1,
	   md5(cms_agg(nk, w, 0.01, 0.01)::text) = :'par2' AS same2
FROM cms_zipf;
SELECT md5(cms_union_agg(s)::text) = :'par3' AS same3 FROM cms_zipf_parts;
SELECT md5(string_agg(g || ':' || coalesce(s::text, 'NULL'), ',' ORDER BY g)) = :'par4' AS same4
FROM (SELECT g, cms_agg(nk, 0.01, 0.01) AS s
	  FROM cms_zipf WHERE g < 2 OR nk IS NULL GROUP BY g) q;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET parallel_leader_participation;

DROP TABLE cms_small, cms_parts, cms_back, cms_store, cms_stored, cms_zipf,
	cms_zipf_parts;
DROP TYPE "odd ""key"" type";
DROP FUNCTION cms_test_error(text), cms_test_workers_launched(text),
	cms_test_recv(bytea, text);
