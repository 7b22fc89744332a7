-- bfile: samples; sample_agg, the in-memory sample aggregate
SET client_min_messages = warning;
-- the counters and reports below are read after this session's own
-- consolidation: its commits queue nothing for a background worker,
-- which would hold the consolidation lock meanwhile
SET streamsketch.background_consolidation = off;

-- n distinct values of the input, n at most the input's values
SELECT cardinality(s) AS n, (SELECT count(DISTINCT v) FROM unnest(s) v) AS distinct_values,
       (SELECT bool_and(v BETWEEN 1 AND 1000) FROM unnest(s) v) AS from_input
FROM (SELECT sample_agg(g, 5) AS s FROM generate_series(1, 1000) g) x;
SELECT sample_agg(g, 10) @> ARRAY[1, 2, 3] AND cardinality(sample_agg(g, 10)) = 3 AS all_three
FROM generate_series(1, 3) g;
SELECT pg_typeof(sample_agg(g::text, 2)), pg_typeof(sample_agg(g::numeric, 2, 1.0))
FROM generate_series(1, 10) g;
-- toasted values are sampled whole
SELECT count(*) AS values, min(length(v)) AS shortest, max(length(v)) AS longest
FROM unnest((SELECT sample_agg(repeat('x', 100000 + g), 5)
             FROM generate_series(1, 5) g)) v;

-- uniform: 20,000 samples of 2 of the values 1..10; chi-square over the
-- ten values (9 degrees of freedom; 56 is exceeded with probability
-- about 1e-9 when every value has the same chance)
WITH s AS (SELECT unnest(sample_agg(g, 2)) AS v
           FROM generate_series(1, 10) g, generate_series(1, 20000) r GROUP BY r),
     c AS (SELECT v, count(*) AS n FROM s GROUP BY v)
SELECT count(*) AS values_drawn, sum((n - 4000.0) ^ 2 / 4000.0) < 56 AS uniform
FROM c;

-- weighted: one of value 1 (weight 1) and value 2 (weight 3), 30,000
-- times: value 2 three times in four (22,500; six standard deviations
-- are 450); weight 0 is never drawn, NULL weights and values are skipped
WITH s AS (SELECT sample_agg(v, 1, w) AS x
           FROM (VALUES (1, 1.0), (2, 3.0), (3, 0.0), (4, NULL), (NULL, 5.0)) t(v, w),
                generate_series(1, 30000) r GROUP BY r)
SELECT count(*) FILTER (WHERE x = '{2}') BETWEEN 22050 AND 22950 AS proportional,
       count(*) FILTER (WHERE x && '{3,4}' OR x IS NULL) AS never
FROM s;

-- parallel: the partial samples of the workers are merged by their keys,
-- so the result is a sample of the whole table (a merge that kept one
-- worker's part would not draw half of its values from each half)
CREATE TABLE bf_big AS SELECT g FROM generate_series(1, 200000) g;
ANALYZE bf_big;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT sample_agg(g, 100) FROM bf_big;
CREATE TEMP TABLE bf_runs (s int[]);
DO $$
BEGIN
	FOR i IN 1 .. 60 LOOP
		INSERT INTO bf_runs SELECT sample_agg(g, 100) FROM bf_big;
	END LOOP;
END
$$;
-- 6,000 values, 3,000 expected in the lower half (six standard deviations
-- are 232)
SELECT count(*) AS drawn, count(*) FILTER (WHERE v <= 100000) BETWEEN 2768 AND 3232 AS balanced,
       bool_and(cardinality(s) = 100) AS full_samples
FROM bf_runs, unnest(s) v;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

-- refusals
SELECT sample_agg(1, NULL);
SELECT sample_agg(1, 0);
SELECT sample_agg(1, 10000001);
SELECT sample_agg(g, g) FROM generate_series(1, 2) g;
SELECT sample_agg(1, 2, -1);
SELECT sample_agg(1, 2, 'NaN');
SELECT sample_agg(1, 2, 'Infinity');
SELECT sample_agg(NULL::int, 3) IS NULL AS no_values;

DROP TABLE bf_big;

-- ---------------------------------------------------------------------
-- The bfile access method
-- ---------------------------------------------------------------------

-- fewer rows than the largest sample: the sample is the whole stream
SELECT bfile_create('bf_small', 'id bigint, v text', sample_size => 1000);
INSERT INTO bf_small SELECT g, 'x' || g FROM generate_series(1, 500) g;
SELECT count(*) AS rows, count(DISTINCT id) AS ids, min(id), max(id),
       bool_and(v = 'x' || id) AS intact
FROM bf_small;
SELECT mode, sample_size, min_size, size, level, seen, inclusion_probability
FROM bfile_info('bf_small');

-- the inserts' draws (which item is kept once L > 1) repeat from run to
-- run; the levels repeat by the tables' seeds
SET streamsketch.test_bfile_coins = 1;

-- more: never more than sample_size rows, each of the stream's; the size
-- is the inclusion probability times the items seen, in expectation; the
-- buckets and the tail hold the sample
SET streamsketch.test_bfile_seed = 7;
SELECT bfile_create('bf_uni', 'id bigint', sample_size => 1000, min_fraction => 0.8);
INSERT INTO bf_uni SELECT g FROM generate_series(1, 1000000) g;
SELECT count(*) < 1000 AS under_max, count(*) = count(DISTINCT id) AS distinct_rows,
       bool_and(id BETWEEN 1 AND 1000000) AS from_stream
FROM bf_uni;
SELECT size < sample_size AS bounded, seen,
       abs(size - inclusion_probability * seen) < 0.25 * sample_size AS near_expectation,
       discards > 0 AS discarded, unrolls > 0 AS unrolled,
       (SELECT sum(n) FROM unnest(bucket_items) n) + tail_items = size AS buckets_hold_sample,
       cardinality(bucket_items) <= buckets AS within_buckets
FROM bfile_info('bf_uni');
-- a rolled back insert is not a stream item; a committed one is
BEGIN;
INSERT INTO bf_uni SELECT g FROM generate_series(1, 5000) g;
ROLLBACK;
SELECT seen FROM bfile_info('bf_uni');
SELECT bfile_flush('bf_uni') < 1000 AS flushed;
SELECT seen FROM bfile_info('bf_uni');

-- an item whose level cannot reach L is dropped at the insert and only
-- counted: 100,000 rows at an inclusion probability near 1/1000 add a few
-- hundred change log records, not 100,000; savepoints rolled back take
-- their counts with them (1,000 + 100,000 + 10 + 7 items committed)
BEGIN;
INSERT INTO bf_uni SELECT g FROM generate_series(1, 1000) g;
SAVEPOINT a;
INSERT INTO bf_uni SELECT g FROM generate_series(1, 1000) g;
ROLLBACK TO a;
INSERT INTO bf_uni SELECT g FROM generate_series(1, 100000) g;
INSERT INTO bf_uni SELECT g FROM generate_series(1, 10) g;
SAVEPOINT b;
INSERT INTO bf_uni SELECT g FROM generate_series(1, 7) g;
RELEASE b;
SAVEPOINT c;
INSERT INTO bf_uni SELECT g FROM generate_series(1, 5) g;
ROLLBACK TO c;
COMMIT;
SELECT log_records BETWEEN 1 AND 1000 AS dropped_at_insert FROM streamsketch_log_info('bf_uni');
SELECT bfile_flush('bf_uni') > 0 AS flushed;
SELECT seen FROM bfile_info('bf_uni');

-- uniform: 20 streams of 100,000 rows (seeds 101..120) into samples of at
-- most 1,000; every position has the same chance: chi-square over ten
-- bins of positions (9 degrees of freedom; 56 is exceeded with
-- probability about 1e-9)
CREATE TEMP TABLE bf_draws (run int, id bigint);
DO $$
BEGIN
	FOR r IN 101 .. 120 LOOP
		EXECUTE format('SET streamsketch.test_bfile_seed = %s', r);
		PERFORM bfile_create('bf_run', 'id bigint', sample_size => 1000, min_fraction => 0.8);
		INSERT INTO bf_run SELECT g FROM generate_series(0, 99999) g;
		COMMIT;					-- the sample holds committed rows only
		INSERT INTO bf_draws SELECT r, id FROM bf_run;
		DROP TABLE bf_run;
	END LOOP;
END
$$;
WITH c AS (SELECT id / 10000 AS bin, count(*) AS n FROM bf_draws GROUP BY 1),
     t AS (SELECT sum(n) / 10.0 AS e FROM c)
SELECT count(*) AS bins, sum((n - e) ^ 2 / e) < 56 AS uniform,
       (SELECT count(DISTINCT run) FROM bf_draws) AS runs
FROM c, t;

-- bfile_subsample: exactly n rows of the sample, distinct, from it; all
-- of it for n at least its size; none for 0
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids,
       bool_and(id IN (SELECT id FROM bf_uni)) AS from_sample
FROM bfile_subsample(NULL::bf_uni, 300);
SELECT count(*) = (SELECT count(*) FROM bf_uni) AS whole_sample
FROM bfile_subsample(NULL::bf_uni, 5000);
SELECT count(*) FROM bfile_subsample(NULL::bf_uni, 0);
SELECT bfile_subsample(NULL::bf_uni, -1);
SELECT bfile_subsample(NULL::bf_uni, NULL);
SELECT bfile_subsample(NULL::int, 1);
SELECT bfile_subsample(NULL::bf_draws, 1);
-- uniform over the stream: subsamples of 300 of 20 seeded streams, by
-- position (chi-square as above)
CREATE TEMP TABLE bf_sub (id bigint);
DO $$
BEGIN
	FOR r IN 401 .. 420 LOOP
		EXECUTE format('SET streamsketch.test_bfile_seed = %s', r);
		PERFORM bfile_create('bf_run', 'id bigint', sample_size => 1000, min_fraction => 0.8);
		INSERT INTO bf_run SELECT g FROM generate_series(0, 99999) g;
		COMMIT;
		-- (EXECUTE: each bf_run is a new row type)
		EXECUTE 'INSERT INTO bf_sub SELECT id FROM bfile_subsample(NULL::bf_run, 300)';
		DROP TABLE bf_run;
	END LOOP;
END
$$;
WITH c AS (SELECT id / 10000 AS bin, count(*) AS n FROM bf_sub GROUP BY 1)
SELECT count(*) AS bins, sum(n) AS drawn, sum((n - 600.0) ^ 2 / 600.0) < 56 AS uniform
FROM c;

-- bfile_window: the rows of the sample in a time range, equal to a filter
-- of the whole sample, reading a few pages (skip lists) rather than all
SET streamsketch.test_bfile_seed = 501;
SELECT bfile_create('bf_time', 'id bigint, ts timestamptz', sample_size => 200000,
                    min_fraction => 0.8, buckets => 8, time_column => 'ts');
INSERT INTO bf_time SELECT g, timestamptz '2026-01-01 00:00+00' + g * interval '1 second'
FROM generate_series(1, 1000000) g;
CREATE FUNCTION pg_temp.bf_window_check(lo timestamptz, hi timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	w bigint;
	f bigint;
	d bigint;
BEGIN
	SELECT count(*) INTO w FROM bfile_window(NULL::bf_time, lo, hi);
	SELECT count(*) INTO f FROM bf_time WHERE ts BETWEEN lo AND hi;
	SELECT count(*) INTO d FROM
		((SELECT * FROM bfile_window(NULL::bf_time, lo, hi)
		  EXCEPT ALL SELECT * FROM bf_time WHERE ts BETWEEN lo AND hi)
		 UNION ALL
		 (SELECT * FROM bf_time WHERE ts BETWEEN lo AND hi
		  EXCEPT ALL SELECT * FROM bfile_window(NULL::bf_time, lo, hi))) x;
	RETURN w || ' rows, ' || CASE WHEN w = f AND d = 0 THEN 'equal to the filter' ELSE 'DIFFERENT' END;
END
$$;
SELECT pg_temp.bf_window_check('2026-01-05 00:00+00', '2026-01-05 01:00+00') AS one_hour,
       pg_temp.bf_window_check('2026-01-01 00:00+00', '2026-01-01 00:10+00') AS oldest,
       pg_temp.bf_window_check('2026-01-12 13:00+00', '2026-01-20 00:00+00') AS newest,
       pg_temp.bf_window_check('2025-01-01 00:00+00', '2027-01-01 00:00+00') AS everything,
       pg_temp.bf_window_check('2026-01-05 01:00+00', '2026-01-05 00:00+00') AS empty;
-- pages read: an hour's window against the whole sample
CREATE FUNCTION pg_temp.bf_buffers(q text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	plan json;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || q INTO plan;
	RETURN (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint +
		   (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
END
$$;
SELECT pg_temp.bf_buffers($$SELECT * FROM bfile_window(NULL::bf_time,
                             '2026-01-05 00:00+00'::timestamptz, '2026-01-05 01:00+00'::timestamptz)$$)
         * 10 < pg_temp.bf_buffers('SELECT * FROM bf_time') AS under_a_tenth;
-- bounds of the column's type, an unknown literal, or castable to it
SELECT count(*) FROM bfile_window(NULL::bf_time, '2026-01-05 00:00+00', '2026-01-05 00:00:10+00');
SELECT count(*) FROM bfile_window(NULL::bf_time, 1, 2);
SELECT count(*) FROM bfile_window(NULL::bf_time, NULL::timestamptz, now());
-- without a time column: positions in the stream (from 0)
SELECT count(*) = (SELECT count(*) FROM bf_uni WHERE id BETWEEN 500001 AND 600000) AS by_position
FROM bfile_window(NULL::bf_uni, 500000, 599999);
-- times out of arrival order: still the filter (the bucket is read whole)
SELECT bfile_create('bf_shuffled', 'id int, t int', sample_size => 100000, time_column => 't');
INSERT INTO bf_shuffled SELECT g, (g * 7919) % 50000 FROM generate_series(1, 50000) g;
SELECT count(*) = (SELECT count(*) FROM bf_shuffled WHERE t BETWEEN 100 AND 300) AS shuffled
FROM bfile_window(NULL::bf_shuffled, 100, 300);
SELECT bfile_create('bf_bad', 'id int, t text', time_column => 't');
SELECT bfile_create('bf_bad', 'id int', time_column => 'nope');
INSERT INTO bf_shuffled VALUES (1, NULL);
-- ALTER TABLE checks a new constraint by scanning the sample, resetting
-- its memory after each row: SET NOT NULL passes, a CHECK constraint is
-- refused as on every structure (23514 if a row violates it, else 0A000)
ALTER TABLE bf_shuffled ALTER COLUMN t SET NOT NULL;
ALTER TABLE bf_shuffled ALTER COLUMN t DROP NOT NULL;
ALTER TABLE bf_shuffled ADD CONSTRAINT bf_ck CHECK (id >= 0);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE bf_shuffled ADD CONSTRAINT bf_ck CHECK (id < 100);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS constraints FROM pg_constraint WHERE conrelid = 'bf_shuffled'::regclass;
-- a column may be declared NOT NULL, the time column among them: the
-- table's definition then refuses a NULL time (23502)
SELECT bfile_create('bf_nn', 'id int, ts timestamptz NOT NULL', time_column => 'ts');
SELECT attname, attnotnull FROM pg_attribute
WHERE attrelid = 'bf_nn'::regclass AND attnum > 0 ORDER BY attnum;
INSERT INTO bf_nn VALUES (1, '2026-01-05 00:00+00'), (2, '2026-01-06 00:00+00');
INSERT INTO bf_nn VALUES (3, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT id FROM bfile_window(NULL::bf_nn, '2026-01-01 00:00+00', '2026-01-31 00:00+00') ORDER BY id;
DROP TABLE bf_nn;
-- only unnamed NOT NULL: other constraints and defaults are refused
SELECT bfile_create('bf_bad', 'id int CONSTRAINT nn NOT NULL');
\echo :LAST_ERROR_SQLSTATE
SELECT bfile_create('bf_bad', 'id int NOT NULL DEFAULT 1');
\echo :LAST_ERROR_SQLSTATE
SELECT bfile_create('bf_bad', 'id int NOT NULL CHECK (id > 0)');
\echo :LAST_ERROR_SQLSTATE
RESET streamsketch.test_bfile_seed;

-- weighted: rows of weight 4 are four times as likely as rows of weight 1
-- (while below 1): over 10 streams, 4 within [3.4, 4.6]
CREATE TEMP TABLE bf_wdraws (w int);
DO $$
BEGIN
	FOR r IN 201 .. 210 LOOP
		EXECUTE format('SET streamsketch.test_bfile_seed = %s', r);
		PERFORM bfile_create('bf_w', 'id bigint, w int', sample_size => 2000,
							 min_fraction => 0.8, mode => 'weighted', weight_column => 'w');
		INSERT INTO bf_w SELECT g, CASE WHEN g % 2 = 0 THEN 4 ELSE 1 END
		FROM generate_series(1, 200000) g;
		COMMIT;
		INSERT INTO bf_wdraws SELECT w FROM bf_w;
		DROP TABLE bf_w;
	END LOOP;
END
$$;
SELECT (count(*) FILTER (WHERE w = 4))::float8 / count(*) FILTER (WHERE w = 1)
         BETWEEN 3.4 AND 4.6 AS proportional
FROM bf_wdraws;

-- decayed: every row is in the sample when it arrives and stays until
-- the second discard after its arrival, so the newest rows are all
-- there; older ones thin out
SET streamsketch.test_bfile_seed = 301;
SELECT bfile_create('bf_dec', 'id bigint', sample_size => 5000, min_fraction => 0.8,
                    mode => 'decayed');
INSERT INTO bf_dec SELECT g FROM generate_series(1, 200000) g;
SELECT (SELECT count(*) FROM bf_dec WHERE id > 199900) AS newest_100,
       (SELECT count(*) FROM bf_dec WHERE id > 180000) >
         10 * (SELECT count(*) FROM bf_dec WHERE id <= 20000) AS decays,
       (SELECT inclusion_probability IS NULL FROM bfile_info('bf_dec')) AS by_age;
RESET streamsketch.test_bfile_seed;

-- decayed, as section 6.2 predicts: a row that arrived at level L_i is
-- in the sample at level L with probability alpha^(L - L_i - 1), or 1
-- while L - L_i <= 1.  Batches of 100 rows, each drawn at once (reading
-- bfile_info runs the round), L read before and after; a batch during
-- which L rose is left out (its rows arrived at either level).
-- Chi-square over the ages L - L_i >= 2 with at least 5 rows expected
-- (10 to 30 of them; 85 is exceeded with probability below 1e-6)
SET streamsketch.test_bfile_seed = 302;
SELECT bfile_create('bf_age', 'id bigint', sample_size => 5000, min_fraction => 0.8,
                    mode => 'decayed');
CREATE TEMP TABLE bf_arrivals (batch int, level int);
DO $$
DECLARE
	before int;
	after int;
BEGIN
	FOR b IN 0..1999 LOOP
		SELECT level INTO before FROM bfile_info('bf_age');
		INSERT INTO bf_age SELECT g FROM generate_series(b * 100, b * 100 + 99) g;
		COMMIT;
		SELECT level INTO after FROM bfile_info('bf_age');
		IF before = after THEN
			INSERT INTO bf_arrivals VALUES (b, before);
		END IF;
	END LOOP;
END
$$;
WITH arr AS (SELECT batch, (SELECT level FROM bfile_info('bf_age')) - level AS age
             FROM bf_arrivals),
     obs AS (SELECT a.age, count(*) AS o FROM bf_age s JOIN arr a ON s.id / 100 = a.batch
             GROUP BY a.age),
     exp AS (SELECT age, 100.0 * count(*) * CASE WHEN age <= 1 THEN 1 ELSE 0.8 ^ (age - 1) END AS e
             FROM arr GROUP BY age)
SELECT count(*) FILTER (WHERE e.age <= 1 AND coalesce(o.o, 0) <> e.e) AS young_missing,
       count(*) FILTER (WHERE e.age >= 2 AND e.e >= 5) BETWEEN 10 AND 30 AS ages_tested,
       sum((coalesce(o.o, 0) - e.e) ^ 2 / e.e) FILTER (WHERE e.age >= 2 AND e.e >= 5) < 85
         AS as_predicted
FROM exp e LEFT JOIN obs o USING (age);
RESET streamsketch.test_bfile_seed;
DROP TABLE bf_age;

-- a sample bounded by bytes (of the rows as stored, with their headers)
-- rather than rows: never more, and the rows kept are not chosen by size
-- (rows of 0 to 199 bytes of text; the means are within six standard
-- deviations of the stream's)
SELECT bfile_create('bf_bytes', 'id bigint, t text', sample_size => '1MB');
INSERT INTO bf_bytes SELECT g, repeat('x', g % 200) FROM generate_series(1, 200000) g;
SELECT sample_size, sample_bytes, data_bytes < sample_bytes AS bounded,
       data_bytes >= min_bytes / 2 AS not_small, discards > 5 AS discarded,
       (SELECT count(*) FROM bf_bytes) = size AS rows_counted,
       (SELECT abs(avg(id) - 100000) < 6 * 57735 / sqrt(count(*)) AND
               abs(avg(length(t)) - 99.5) < 6 * 57.7 / sqrt(count(*)) FROM bf_bytes) AS uniform
FROM bfile_info('bf_bytes');
SET streamsketch.bfile_sample_size = '2GB';
CREATE TABLE bf_bytes2 (id int) USING bfile;
RESET streamsketch.bfile_sample_size;
SELECT objname, label FROM pg_catalog.pg_seclabels
WHERE provider = 'streamsketch' AND objname LIKE 'bf_bytes%' ORDER BY 1;
SELECT bfile_create('bf_bad', 'id bigint', sample_size => '10 parsecs');
SELECT bfile_create('bf_bad', 'id bigint', sample_size => '32kB');
SELECT bfile_create('bf_bad', 'id bigint', sample_size => now());
SET streamsketch.bfile_sample_size = 'lots';
DROP TABLE bf_bytes, bf_bytes2;

-- TRUNCATE empties the sample and keeps the parameters
TRUNCATE bf_uni;
SELECT count(*) AS rows, (SELECT sample_size || ' ' || size || ' ' || seen
                          FROM bfile_info('bf_uni')) AS info
FROM bf_uni;

-- refusals
SELECT bfile_create('bf_bad', 'id bigint', sample_size => 1);
SELECT bfile_create('bf_bad', 'id bigint', min_fraction => 1);
SELECT bfile_create('bf_bad', 'id bigint', buckets => 0);
SELECT bfile_create('bf_bad', 'id bigint', mode => 'sometimes');
SELECT bfile_create('bf_bad', 'id bigint', mode => 'weighted');
SELECT bfile_create('bf_bad', 'id bigint, w text', mode => 'weighted', weight_column => 'w');
SELECT bfile_create('bf_bad', 'id bigint, w int', weight_column => 'w');
SELECT bfile_create('bf_bad', 'id bigint); DROP TABLE bf_small; CREATE TABLE x (y int');
SELECT bfile_create('bf_bad', 'id bigint DEFAULT 1');
SELECT bfile_create('bf_w2', 'id bigint, w float8', mode => 'weighted', weight_column => 'w');
INSERT INTO bf_w2 VALUES (1, NULL);
INSERT INTO bf_w2 VALUES (1, -1);
INSERT INTO bf_w2 VALUES (1, 'NaN');
INSERT INTO bf_small VALUES (1, repeat('x', 9000));
-- a row stored inline whole: a long value that compresses well is
-- stored uncompressed, and fits if it fits a page
INSERT INTO bf_small VALUES (2, repeat('y', 7000)), (3, NULL), (NULL, 'z');
SELECT length(v) FROM bf_small WHERE id = 2 AND length(v) > 10;
SELECT id, v FROM bf_small WHERE id = 3 OR id IS NULL ORDER BY id;
SELECT bfile_info('bf_draws'::regclass);

-- an ordinary role creates, fills and reads its own bfile; another needs
-- SELECT for bfile_info
CREATE ROLE bf_user;
CREATE ROLE bf_other;
CREATE SCHEMA bf_schema AUTHORIZATION bf_user;
SET ROLE bf_user;
SELECT bfile_create('bf_schema.mine', 'id int', sample_size => 100);
INSERT INTO bf_schema.mine SELECT g FROM generate_series(1, 50) g;
SELECT count(*) FROM bf_schema.mine;
SELECT size FROM bfile_info('bf_schema.mine');
GRANT USAGE ON SCHEMA bf_schema TO bf_other;
RESET ROLE;
SET ROLE bf_other;
SELECT size FROM bfile_info('bf_schema.mine');
RESET ROLE;

DROP TABLE bf_small, bf_uni, bf_dec, bf_w2, bf_time, bf_shuffled;
DROP SCHEMA bf_schema CASCADE;
DROP ROLE bf_user;
DROP ROLE bf_other;
