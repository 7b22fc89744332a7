-- lert: plain SQL key predicates look keys up as lert_reported does
-- (Custom Scan (lert lookup)); each answer is compared with the scan's,
-- the lookup scan turned off
SET client_min_messages = warning;
-- the reports below are read after this session's own consolidation
SET streamsketch.background_consolidation = off;
-- the tables are small: a scan would be cheaper, but the paths are tested
SET enable_seqscan = off;

-- lp_hits: keys k0..k49 observed 1..50 times, T = 24 (the default):
-- k23..k49 reported, after a flush
CREATE TABLE lp_hits (key text, count bigint) USING lert;
CREATE TABLE lp_plain (key bigint) USING lert;
INSERT INTO lp_hits SELECT 'k' || i, 1 FROM generate_series(0, 49) i,
    generate_series(0, 49) j WHERE j <= i;
INSERT INTO lp_plain SELECT i % 10 FROM generate_series(1, 300) i;
SELECT lert_flush('lp_hits') >= 0 AS flushed, lert_flush('lp_plain') >= 0 AS flushed;
SELECT count(*) AS reported FROM lp_hits;
SELECT count(*) AS reported FROM lp_plain;

\i sql/include/lookup_check.sql

-- equality with a constant: the key and its count at the report
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'k30'$$);
SELECT lookup_check($$SELECT count FROM lp_hits WHERE 'k42' = key$$);
SELECT lookup_check($$SELECT key FROM lp_hits WHERE key = 'k30'$$);
SELECT lookup_check($$SELECT tableoid::regclass, key FROM lp_hits WHERE key = 'k49'$$);
SELECT lookup_check($$SELECT lp_hits FROM lp_hits WHERE key = 'k25'$$);
-- observed but not reported, and never observed: no row
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'k3'$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'nope'$$);
SELECT lert_reported('lp_hits', 'k3'::text) AS k3_reported, lert_count('lp_hits', 'k3'::text) AS k3_count;
-- another column's qual filters the row found
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'k30' AND count > 100$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'k30' AND count >= 20$$);
-- IN lists and = ANY (array), duplicates and NULLs in them
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key IN ('k30', 'k31', 'k30', 'k1', 'zz')$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = ANY (ARRAY['k33', NULL, 'k34'])$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = ANY ('{}'::text[])$$);
-- NULL keys match nothing (= NULL), as in the scan
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = NULL$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = ANY (NULL::text[])$$);
-- a table without a count column; bigint key against int and smallint
SELECT lookup_check($$SELECT * FROM lp_plain WHERE key = 4$$);
SELECT lookup_check($$SELECT * FROM lp_plain WHERE key = 4::smallint$$);
SELECT lookup_check($$SELECT * FROM lp_plain WHERE key IN (1, 2, 3::bigint)$$);

-- the path does not apply: ranges, OR, other columns alone, IS NULL
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key > 'k45'$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'k30' OR key = 'k31'$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE count = 45$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key IS NULL$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = ANY (ARRAY['k30']) IS NOT FALSE$$);

-- an int key against a bigint value: its cast could fail, the scan
CREATE TABLE lp_int (key int, count int) USING lert;
INSERT INTO lp_int SELECT i % 4, 1 FROM generate_series(1, 200) i;
SELECT lert_flush('lp_int') >= 0 AS flushed;
SELECT lookup_check($$SELECT * FROM lp_int WHERE key = 2::bigint$$);
SELECT lookup_check($$SELECT * FROM lp_int WHERE key = 2$$);
SELECT lookup_check($$SELECT * FROM lp_int WHERE key = 2::smallint$$);

-- collations: a deterministic one other than the default uses the path
-- (nondeterministic ones, which need ICU: sql/icu.sql)
CREATE TABLE lp_coll (key text COLLATE "C", count int) USING lert;
INSERT INTO lp_coll SELECT 'Key' || (i % 3), 1 FROM generate_series(1, 300) i;
SELECT lert_flush('lp_coll') >= 0 AS flushed;
SELECT lookup_check($$SELECT * FROM lp_coll WHERE key = 'Key1'$$);
SELECT lookup_check($$SELECT * FROM lp_coll WHERE key = 'Key1' COLLATE "POSIX"$$);

-- varchar keys compare as text; character(n) (equal values of other
-- bytes, padding) and numeric (1.0 = 1.00) keys scan
CREATE TABLE lp_vc (key varchar) USING lert;
CREATE TABLE lp_bp (key char(4)) USING lert;
CREATE TABLE lp_num (key numeric, count int) USING lert;
INSERT INTO lp_vc SELECT 'v' || (i % 3) FROM generate_series(1, 300) i;
INSERT INTO lp_bp SELECT 'b' || (i % 3) FROM generate_series(1, 300) i;
INSERT INTO lp_num SELECT (i % 3)::numeric(4, 2), 1 FROM generate_series(1, 300) i;
SELECT lert_flush('lp_vc') >= 0 AS flushed, lert_flush('lp_bp') >= 0 AS flushed,
    lert_flush('lp_num') >= 0 AS flushed;
SELECT lookup_check($$SELECT * FROM lp_vc WHERE key = 'v1'$$);
SELECT lookup_check($$SELECT * FROM lp_bp WHERE key = 'b1'$$);
SELECT lookup_check($$SELECT * FROM lp_num WHERE key = 1.0$$);

-- parameters: a prepared statement's generic plan
SET plan_cache_mode = force_generic_plan;
PREPARE lp_one (text) AS SELECT * FROM lp_hits WHERE key = $1;
EXPLAIN (COSTS OFF) EXECUTE lp_one('k40');
EXECUTE lp_one('k40');
EXECUTE lp_one('k2');
EXECUTE lp_one(NULL);
PREPARE lp_many (text[]) AS SELECT * FROM lp_hits WHERE key = ANY ($1) ORDER BY key;
EXPLAIN (COSTS OFF) EXECUTE lp_many('{k40,k41,k1}');
EXECUTE lp_many('{k40,k41,k1}');
SET streamsketch.enable_lookup_scan = off;
EXECUTE lp_one('k40');
EXECUTE lp_many('{k40,k41,k1}');
RESET streamsketch.enable_lookup_scan;
RESET plan_cache_mode;

-- a nested loop over a small outer side probes per outer row
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT lookup_check($$SELECT v.k, h.count FROM (VALUES ('k22'), ('k5'), ('k47'), (NULL)) v(k)
    JOIN lp_hits h ON h.key = v.k$$);
SELECT lookup_check($$SELECT v.k, h.key FROM (VALUES ('k22'), ('k5')) v(k)
    LEFT JOIN lp_hits h ON h.key = v.k$$);
RESET enable_hashjoin;
RESET enable_mergejoin;

-- the transaction's own inserts: no report before they commit, in the
-- lookup as in the scan
BEGIN;
INSERT INTO lp_hits SELECT 'fresh', 1 FROM generate_series(1, 30);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'fresh'$$);
SELECT lert_count('lp_hits', 'fresh'::text) AS fresh_count;
COMMIT;
SELECT lert_flush('lp_hits') >= 0 AS flushed;
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'fresh'$$);

-- privileges and row-level security are the scan's
CREATE ROLE lp_reader;
CREATE ROLE lp_nobody;
GRANT SELECT ON lp_hits TO lp_reader;
GRANT EXECUTE ON FUNCTION lookup_check(text) TO lp_reader, lp_nobody;
SET ROLE lp_reader;
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'k30'$$);
RESET ROLE;
CREATE FUNCTION lp_error(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
GRANT EXECUTE ON FUNCTION lp_error(text) TO lp_nobody;
SET ROLE lp_nobody;
SELECT lp_error($$SELECT * FROM lp_hits WHERE key = 'k30'$$);
SET streamsketch.enable_lookup_scan = off;
SELECT lp_error($$SELECT * FROM lp_hits WHERE key = 'k30'$$);
RESET streamsketch.enable_lookup_scan;
RESET ROLE;
ALTER TABLE lp_hits ENABLE ROW LEVEL SECURITY;
CREATE POLICY lp_some ON lp_hits FOR SELECT USING (key < 'k4');
SET ROLE lp_reader;
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key = 'k30'$$);
SELECT lookup_check($$SELECT * FROM lp_hits WHERE key IN ('k30', 'k45')$$);
RESET ROLE;
ALTER TABLE lp_hits DISABLE ROW LEVEL SECURITY;


-- The count at the report comes with the key's entries: a lookup that
-- reads it reads the pages of one that reads the key alone (the lookup
-- node's buffers in EXPLAIN), however many report pages come before the
-- key's report.  A lert of the earlier format (0) passes over them.
CREATE FUNCTION lp_pages(q text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	FOR r IN EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		IF r ~ 'Buffers:' THEN
			RETURN coalesce((regexp_match(r, 'hit=(\d+)'))[1]::int, 0) +
				coalesce((regexp_match(r, 'read=(\d+)'))[1]::int, 0);
		END IF;
	END LOOP;
	RETURN 0;
END $$;
CREATE TABLE lp_many (key text, count bigint) USING lert;
SET streamsketch.test_lert_format = 0;
CREATE TABLE lp_old (key text, count bigint) USING lert;
RESET streamsketch.test_lert_format;
ALTER TABLE lp_many SET (autovacuum_enabled = off);
ALTER TABLE lp_old SET (autovacuum_enabled = off);
-- 2000 keys reported over several report pages, observed again after
INSERT INTO lp_many SELECT 'm' || i, 1 FROM generate_series(1, 2000) i, generate_series(1, 10);
INSERT INTO lp_old SELECT 'm' || i, 1 FROM generate_series(1, 2000) i, generate_series(1, 10);
SELECT lert_flush('lp_many') >= 0 AS flushed, lert_flush('lp_old') >= 0 AS flushed;
INSERT INTO lp_many SELECT 'm' || i, 1 FROM generate_series(1, 2000) i, generate_series(1, 20);
INSERT INTO lp_old SELECT 'm' || i, 1 FROM generate_series(1, 2000) i, generate_series(1, 20);
SELECT lert_flush('lp_many') >= 0 AS flushed, lert_flush('lp_old') >= 0 AS flushed;
INSERT INTO lp_many SELECT 'm' || i, 1 FROM generate_series(1, 2000, 3) i, generate_series(1, 5);
INSERT INTO lp_old SELECT 'm' || i, 1 FROM generate_series(1, 2000, 3) i, generate_series(1, 5);
SELECT count(*) AS reported FROM lp_many;
SELECT count(*) AS reported FROM lp_old;
SELECT lookup_check($$SELECT * FROM lp_many WHERE key IN ('m1', 'm1000', 'm1998', 'm2000')$$);
SELECT lookup_check($$SELECT * FROM lp_old WHERE key IN ('m1', 'm1000', 'm1998', 'm2000')$$);
SELECT lp_pages($$SELECT * FROM lp_many WHERE key IN ('m1', 'm1000', 'm1998', 'm2000')$$) =
       lp_pages($$SELECT key FROM lp_many WHERE key IN ('m1', 'm1000', 'm1998', 'm2000')$$)
       AS count_reads_the_key_pages,
       lp_pages($$SELECT * FROM lp_old WHERE key IN ('m1', 'm1000', 'm1998', 'm2000')$$) >
       lp_pages($$SELECT key FROM lp_old WHERE key IN ('m1', 'm1000', 'm1998', 'm2000')$$)
       AS old_format_reads_reports;
DROP TABLE lp_many, lp_old;
DROP FUNCTION lp_pages(text);

-- every variant: the counts at the report the entries keep are the
-- reports' (reports at level 0 and in merges, keys observed after their
-- report, fixed and keyed level-0 pages, several cones)
CREATE FUNCTION lp_same(t regclass, n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	q text := format('SELECT * FROM %s WHERE key = ANY (%L::int8[])', t,
					 (SELECT array_agg(i) FROM generate_series(0, n) i));
	plan text;
	a text;
	b text;
	rows bigint;
BEGIN
	EXECUTE 'EXPLAIN (COSTS OFF) ' || q INTO plan;
	EXECUTE format('SELECT string_agg(x::text, %L ORDER BY x::text), count(*) FROM (%s) x', ',', q)
		INTO a, rows;
	SET LOCAL streamsketch.enable_lookup_scan = off;
	EXECUTE format('SELECT string_agg(x::text, %L ORDER BY x::text) FROM (%s) x', ',', q) INTO b;
	SET LOCAL streamsketch.enable_lookup_scan = on;
	RETURN plan || ': ' || CASE WHEN a IS NOT DISTINCT FROM b THEN 'same, ' ELSE 'DIFFERENT, ' END ||
		rows || ' rows';
END $$;
SET streamsketch.lert_buffer_size = '64kB';
CREATE TABLE lp_cs (key int8, count bigint) USING lert;
SET streamsketch.lert_cones = 4;
CREATE TABLE lp_cs4 (key int8, count bigint) USING lert;
RESET streamsketch.lert_cones;
SET streamsketch.lert_variant = 'immediate';
CREATE TABLE lp_ir (key int8, count bigint) USING lert;
SET streamsketch.lert_variant = 'time_stretch';
SET streamsketch.lert_age_bits = 2;
CREATE TABLE lp_ts (key int8, count bigint) USING lert;
SET streamsketch.lert_variant = 'cascade';
CREATE TABLE lp_cf (key int8, count bigint) USING lert;
RESET streamsketch.lert_variant;
RESET streamsketch.lert_age_bits;
RESET streamsketch.lert_buffer_size;
-- what they report must not depend on when autovacuum consolidates
ALTER TABLE lp_cs SET (autovacuum_enabled = off);
ALTER TABLE lp_cs4 SET (autovacuum_enabled = off);
ALTER TABLE lp_ir SET (autovacuum_enabled = off);
ALTER TABLE lp_ts SET (autovacuum_enabled = off);
ALTER TABLE lp_cf SET (autovacuum_enabled = off);
-- key k in 2k + 1 rows of 1 to 3 observations, the keys interleaved
CREATE FUNCTION lp_feed(t regclass, n int) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('INSERT INTO %s SELECT floor(sqrt((i::bigint * 7919) %% %s))::int8,
					1 + i %% 3 FROM generate_series(1, %s) i', t, n, n);
	RETURN n;
END $$;
SELECT t AS lert, lp_feed(t, 40000) AS fed
FROM unnest(ARRAY['lp_cs', 'lp_cs4', 'lp_ir', 'lp_ts', 'lp_cf']::regclass[]) t;
SELECT t AS lert, lert_flush(t) >= 0 AS flushed, lp_same(t, 200)
FROM unnest(ARRAY['lp_cs', 'lp_cs4', 'lp_ir', 'lp_ts', 'lp_cf']::regclass[]) t;
SELECT t AS lert, lp_feed(t, 20000) AS fed_again
FROM unnest(ARRAY['lp_cs', 'lp_cs4', 'lp_ir', 'lp_ts', 'lp_cf']::regclass[]) t;
SELECT t AS lert, lp_same(t, 200)
FROM unnest(ARRAY['lp_cs', 'lp_cs4', 'lp_ir', 'lp_ts', 'lp_cf']::regclass[]) t;
DROP TABLE lp_cs, lp_cs4, lp_ir, lp_ts, lp_cf;
DROP FUNCTION lp_same(regclass, int);
DROP FUNCTION lp_feed(regclass, int);

-- by cost: a lookup per key, or the scan for many keys
RESET enable_seqscan;
CREATE FUNCTION lp_plan(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	EXECUTE 'EXPLAIN (COSTS OFF) ' || q INTO r;
	RETURN r;
END $$;
SELECT lp_plan($$SELECT * FROM lp_hits WHERE key = 'k30'$$);
SELECT lp_plan(format('SELECT * FROM lp_hits WHERE key = ANY (%L::text[])',
    (SELECT array_agg('k' || i) FROM generate_series(1, 400) i)));

DROP TABLE lp_hits, lp_plain, lp_int, lp_coll, lp_vc, lp_bp, lp_num;
DROP FUNCTION lookup_check(text);
DROP FUNCTION lp_plan(text);
DROP FUNCTION lp_error(text);
DROP ROLE lp_reader, lp_nobody;
