-- bfile: plain SQL ranges on the time column read the skip-list window
-- (Custom Scan (bfile window)); each answer is compared with the scan's,
-- the lookup scan turned off
SET client_min_messages = warning;
-- no background worker consolidates behind the tests' backs
SET streamsketch.background_consolidation = off;
-- the tables are small: a scan may be cheaper, but the paths are tested
SET enable_seqscan = off;

-- a uniform sample holding every row (sample_size above the rows)
SELECT bfile_create('bp_ts', 'id int, ts timestamp NOT NULL, v text',
    sample_size => 100000, time_column => 'ts');
INSERT INTO bp_ts SELECT i, '2024-01-01'::timestamp + i * interval '1 minute', 'v' || i
FROM generate_series(1, 5000) i;
SELECT bfile_flush('bp_ts');
-- a sample that evicted rows (a fixed seed and the inserts' draws
-- repeated: the same sample every run)
SET streamsketch.test_bfile_coins = 1;
SET streamsketch.test_bfile_seed = 11;
SELECT bfile_create('bp_evict', 'id bigint, t int NOT NULL',
    sample_size => 400, time_column => 't');
RESET streamsketch.test_bfile_seed;
INSERT INTO bp_evict SELECT i, i FROM generate_series(1, 20000) i;
SELECT bfile_flush('bp_evict') < 20000 AS evicted;
-- other time types, and a bfile without a time column
SELECT bfile_create('bp_date', 'id int, d date NOT NULL', sample_size => 100000,
    time_column => 'd');
INSERT INTO bp_date SELECT i, '2024-01-01'::date + i FROM generate_series(1, 400) i;
SELECT bfile_create('bp_tz', 'id int, ts timestamptz NOT NULL', sample_size => 100000,
    time_column => 'ts');
INSERT INTO bp_tz SELECT i, '2024-01-01 00:00+00'::timestamptz + i * interval '1 hour'
FROM generate_series(1, 400) i;
SELECT bfile_create('bp_small', 'id smallint, t smallint NOT NULL', sample_size => 100000,
    time_column => 't');
INSERT INTO bp_small SELECT i, i FROM generate_series(1, 400) i;
SELECT bfile_create('bp_notime', 'id int, ts timestamp', sample_size => 100000);
INSERT INTO bp_notime SELECT i, '2024-01-01'::timestamp + i * interval '1 minute'
FROM generate_series(1, 400) i;

-- run a query with and without the window path: the plan, then whether
-- the answers are the same
CREATE FUNCTION bp_check(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	r text;
	a text;
	b text;
	n bigint;
BEGIN
	FOR r IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		RETURN NEXT r;
	END LOOP;
	EXECUTE format('SELECT string_agg(x::text, %L ORDER BY x::text), count(*) FROM (%s) x', ' | ', q) INTO a, n;
	SET LOCAL streamsketch.enable_lookup_scan = off;
	EXECUTE format('SELECT string_agg(x::text, %L ORDER BY x::text) FROM (%s) x', ' | ', q) INTO b;
	SET LOCAL streamsketch.enable_lookup_scan = on;
	RETURN NEXT CASE WHEN a IS NOT DISTINCT FROM b THEN 'same: ' || n || ' rows'
				ELSE 'DIFFERENT: ' || coalesce(a, '(none)') || ' vs ' || coalesce(b, '(none)') END;
END $$;

-- BETWEEN, >= and <, one bound, =, >, <=
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts BETWEEN '2024-01-02' AND '2024-01-02 00:10'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts >= '2024-01-02' AND ts < '2024-01-02 00:10'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts >= '2024-01-04 10:00'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE '2024-01-01 00:05' >= ts$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts = '2024-01-02 12:00'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts > '2024-01-03' AND ts <= '2024-01-03 00:03'$$);
-- several bounds intersected, another column's qual filters
SELECT bp_check($$SELECT id, v FROM bp_ts WHERE ts > '2024-01-02' AND ts >= '2024-01-02 01:00'
    AND ts < '2024-01-02 03:00' AND ts <= '2024-01-02 01:30' AND id % 2 = 0$$);
-- empty windows
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts > '2024-01-03' AND ts < '2024-01-02'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts > 'infinity'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts < '-infinity'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts >= '2030-01-01'$$);
-- a sample that evicted rows, integer bounds of other widths
SELECT bp_check($$SELECT * FROM bp_evict WHERE t BETWEEN 5000 AND 9000$$);
SELECT bp_check($$SELECT * FROM bp_evict WHERE t >= 19000::bigint AND t < 30000000000$$);
SELECT bp_check($$SELECT * FROM bp_evict WHERE t > 2::smallint AND t < 2000$$);
SELECT bp_check($$SELECT count(*) FROM bp_evict WHERE t >= 0$$);
-- date, timestamptz and smallint time columns
SELECT bp_check($$SELECT * FROM bp_date WHERE d BETWEEN '2024-02-01' AND '2024-02-05'$$);
SELECT bp_check($$SELECT * FROM bp_tz WHERE ts >= '2024-01-05 00:00+00' AND ts < '2024-01-05 05:00+00'$$);
SELECT bp_check($$SELECT * FROM bp_small WHERE t BETWEEN 10 AND 12$$);
SELECT bp_check($$SELECT * FROM bp_small WHERE t > 32767 OR t < -32768$$);
SELECT bp_check($$SELECT * FROM bp_small WHERE t >= 390::bigint$$);

-- the path does not apply: another column only, OR of ranges, a bound of
-- another type (date against timestamp, timestamp against timestamptz),
-- = ANY, a volatile bound, no time column
SELECT bp_check($$SELECT * FROM bp_ts WHERE id BETWEEN 10 AND 12$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts < '2024-01-01 00:03' OR ts > '2024-01-04 11:18'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts >= '2024-01-04'::date + 1$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts >= '2024-01-04 11:15+00'::timestamptz$$);
SELECT bp_check($$SELECT * FROM bp_date WHERE d >= '2025-02-01 12:00'::timestamp$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts = ANY (ARRAY['2024-01-02 00:00'::timestamp])$$);
SELECT bp_check($$SELECT count(*) FROM bp_ts WHERE ts > '2024-01-04 11:00'::timestamp + random() * interval '0'$$);
SELECT bp_check($$SELECT * FROM bp_notime WHERE ts BETWEEN '2024-01-01 00:01' AND '2024-01-01 00:03'$$);
-- the same bound as a range: the window, still filtered by the other quals
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts >= '2024-01-04 11:15' AND (id = 1 OR id > 5000)$$);

-- with the scan enabled: the planner compares the costs (a structure has
-- no statistics, so a range is assumed to select a default fraction)
RESET enable_seqscan;
EXPLAIN (COSTS OFF) SELECT * FROM bp_ts WHERE ts BETWEEN '2024-01-02' AND '2024-01-02 00:10';
SET enable_seqscan = off;

-- parameters: generic plans, NULL bounds select nothing
SET plan_cache_mode = force_generic_plan;
PREPARE bp_q(timestamp, timestamp) AS
    SELECT id FROM bp_ts WHERE ts BETWEEN $1 AND $2 ORDER BY id;
EXPLAIN (COSTS OFF) EXECUTE bp_q('2024-01-02', '2024-01-02 00:03');
EXECUTE bp_q('2024-01-02', '2024-01-02 00:03');
EXECUTE bp_q('2024-01-03', '2024-01-03 00:02');
EXECUTE bp_q(NULL, '2024-01-03 00:02');
EXECUTE bp_q('2024-01-03', NULL);
PREPARE bp_q2(bigint) AS SELECT count(*) FROM bp_evict WHERE t >= $1 AND t < $1 + 1000;
EXPLAIN (COSTS OFF) EXECUTE bp_q2(100);
SELECT (SELECT count(*) FROM bp_evict WHERE t >= 100 AND t < 1100) AS scan_answer;
EXECUTE bp_q2(100);
SET streamsketch.enable_lookup_scan = off;
EXECUTE bp_q2(100);
RESET streamsketch.enable_lookup_scan;
DEALLOCATE bp_q;
DEALLOCATE bp_q2;
RESET plan_cache_mode;

-- a nested loop: each outer row's bounds give a window
CREATE TABLE bp_windows (lo timestamp, hi timestamp);
INSERT INTO bp_windows VALUES ('2024-01-02', '2024-01-02 00:02'),
    ('2024-01-03 10:00', '2024-01-03 10:01'), (NULL, '2024-01-03'),
    ('2024-01-04', '2024-01-03');
ANALYZE bp_windows;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT bp_check($$SELECT w.lo, b.id FROM bp_windows w JOIN bp_ts b ON b.ts >= w.lo AND b.ts <= w.hi$$);
SELECT bp_check($$SELECT w.lo, b.id FROM bp_windows w JOIN bp_ts b ON b.ts = w.hi$$);
SELECT bp_check($$SELECT w.lo, b.id FROM bp_windows w JOIN bp_ts b ON b.ts > w.lo
    WHERE b.ts < '2024-01-02 00:03'$$);
RESET enable_hashjoin;
RESET enable_mergejoin;

-- the transaction's own pending rows: not in the sample until it commits,
-- for the window as for the scan
BEGIN;
INSERT INTO bp_ts VALUES (-1, '2024-01-02 00:00:30', 'mine'), (-2, '2030-01-01', 'later');
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts BETWEEN '2024-01-02' AND '2024-01-02 00:01'$$);
SELECT bp_check($$SELECT * FROM bp_ts WHERE ts > '2029-01-01'$$);
ROLLBACK;
-- committed rows still in the change log
INSERT INTO bp_evict SELECT i, i FROM generate_series(20001, 20100) i;
SELECT bp_check($$SELECT * FROM bp_evict WHERE t > 19900$$);

-- privileges: a role with SELECT only reads the window; without it, the
-- same error as the scan
CREATE ROLE bp_reader;
GRANT SELECT ON bp_ts TO bp_reader;
GRANT EXECUTE ON FUNCTION bp_check(text) TO bp_reader;
SET ROLE bp_reader;
SELECT bp_check($$SELECT id FROM bp_ts WHERE ts BETWEEN '2024-01-02' AND '2024-01-02 00:02'$$);
SELECT id FROM bp_evict WHERE t = 5;
RESET ROLE;

-- row-level security: the policy's quals filter the window, before any
-- leaky qual
CREATE FUNCTION bp_leak(int) RETURNS bool LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
	RAISE WARNING 'leaked %', $1;
	RETURN true;
END $$;
GRANT EXECUTE ON FUNCTION bp_leak(int) TO bp_reader;
ALTER TABLE bp_ts ENABLE ROW LEVEL SECURITY;
CREATE POLICY bp_odd ON bp_ts FOR SELECT TO bp_reader USING (id % 2 = 1);
SET ROLE bp_reader;
SELECT bp_check($$SELECT id FROM bp_ts WHERE ts BETWEEN '2024-01-02' AND '2024-01-02 00:04'$$);
EXPLAIN (COSTS OFF) SELECT id FROM bp_ts WHERE ts BETWEEN '2024-01-02' AND '2024-01-02 00:04' AND bp_leak(id);
SELECT id FROM bp_ts WHERE ts BETWEEN '2024-01-02' AND '2024-01-02 00:04' AND bp_leak(id);
RESET ROLE;
DROP POLICY bp_odd ON bp_ts;
ALTER TABLE bp_ts DISABLE ROW LEVEL SECURITY;

-- TABLESAMPLE: not supported on a bfile (bfile_subsample draws a subsample)
SELECT count(*) FROM bp_ts TABLESAMPLE BERNOULLI (50);
SELECT count(*) FROM bfile_subsample(NULL::bp_ts, 10);

DROP FUNCTION bp_check(text);
DROP FUNCTION bp_leak(int);
DROP TABLE bp_ts, bp_evict, bp_date, bp_tz, bp_small, bp_notime, bp_windows;
DROP ROLE bp_reader;
