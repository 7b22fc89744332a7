-- lert_counts: every key's exact count as a relation, and its key quals
-- looked up as lert_count does (Custom Scan (lert counts)); each answer
-- is compared with lert_count and with the function scan's
SET client_min_messages = warning;
SET streamsketch.background_consolidation = off;

-- lc_gen: 3,000 keys in six transactions through a small level 0 (two
-- cones), so that keys are in level 0 and in every on-disk level; lc_truth
-- holds the same observations
SELECT lert_create('lc_gen', 'text', threshold => 50, buffer_size => '64kB',
                   cones => 2) IS NOT NULL AS created;
CREATE TABLE lc_truth (key text);
DO $$
BEGIN
	FOR b IN 1..6 LOOP
		INSERT INTO lc_gen SELECT 'k' || ((i * 7919 + b * 31) % 3000)
			FROM generate_series(1, 2500) i;
		INSERT INTO lc_truth SELECT 'k' || ((i * 7919 + b * 31) % 3000)
			FROM generate_series(1, 2500) i;
		COMMIT;
		PERFORM lert_count('lc_gen', 'x'::text);
	END LOOP;
END $$;
SELECT level0_entries > 0 AS level0, (SELECT bool_and(n > 0) FROM unnest(level_entries) n) AS every_level
FROM lert_info('lc_gen');
-- the keys and counts are the truth's, and each count is lert_count's
SELECT count(*) AS keys, sum(count) AS observations,
       bool_and(count = lert_count('lc_gen', key)) AS as_lert_count
FROM lert_counts('lc_gen', NULL::text);
SELECT count(*) AS mismatches
FROM (SELECT key, count(*) AS n FROM lc_truth GROUP BY key) t
FULL JOIN lert_counts('lc_gen', NULL::text) c USING (key)
WHERE t.n IS DISTINCT FROM c.count;
-- committed rows still in the change log, and the transaction's own
INSERT INTO lc_gen VALUES ('k1'), ('k1'), ('logged');
INSERT INTO lc_truth VALUES ('k1'), ('k1'), ('logged');
BEGIN;
INSERT INTO lc_gen SELECT 'k' || (i % 40) FROM generate_series(1, 200) i;
INSERT INTO lc_gen VALUES ('own'), ('own');
INSERT INTO lc_truth SELECT 'k' || (i % 40) FROM generate_series(1, 200) i;
INSERT INTO lc_truth VALUES ('own'), ('own');
SELECT count(*) AS mismatches
FROM (SELECT key, count(*) AS n FROM lc_truth GROUP BY key) t
FULL JOIN lert_counts('lc_gen', NULL::text) c USING (key)
WHERE t.n IS DISTINCT FROM c.count;
SELECT * FROM lert_counts('lc_gen', NULL::text) WHERE key IN ('own', 'logged', 'k1') ORDER BY key;
ROLLBACK;
-- keys observed only in aborted transactions: no row
BEGIN;
INSERT INTO lc_gen VALUES ('aborted'), ('k2');
ROLLBACK;
BEGIN;
INSERT INTO lc_gen SELECT 'aborted' FROM generate_series(1, 5000);
SELECT lert_count('lc_gen', 'x'::text);
ROLLBACK;
SELECT * FROM lert_counts('lc_gen', NULL::text) WHERE key IN ('own', 'aborted', 'k2', 'logged') ORDER BY key;
SELECT lert_count('lc_gen', 'aborted'::text) AS aborted, lert_count('lc_gen', 'own'::text) AS own;
SELECT count(*) AS mismatches
FROM (SELECT key, count(*) AS n FROM lc_truth GROUP BY key) t
FULL JOIN lert_counts('lc_gen', NULL::text) c USING (key)
WHERE t.n IS DISTINCT FROM c.count;

-- a fixed-size key (the fingerprint is the key), a lert without a count
-- column, never written, and a wrong key type
CREATE TABLE lc_int (key bigint) USING lert;
SELECT count(*) AS keys FROM lert_counts('lc_int', NULL::bigint);
INSERT INTO lc_int SELECT i % 100 FROM generate_series(1, 1000) i;
SELECT lert_flush('lc_int') >= 0 AS flushed;
INSERT INTO lc_int SELECT i % 150 FROM generate_series(1, 300) i;
SELECT count(*) AS keys, sum(count) AS observations,
       bool_and(count = lert_count('lc_int', key)) AS as_lert_count
FROM lert_counts('lc_int', NULL::bigint);
SELECT * FROM lert_counts('lc_int', NULL::int);
SELECT * FROM lert_counts('lc_truth', NULL::text);
SELECT * FROM lert_counts(NULL, NULL::text);

-- views: key quals are looked up; the answers are the function scan's
CREATE VIEW lc_counts AS SELECT * FROM lert_counts('lc_gen', NULL::text);
CREATE VIEW lc_int_counts AS SELECT * FROM lert_counts('lc_int', NULL::bigint);
\i sql/include/lookup_check.sql
SELECT lookup_check($$SELECT * FROM lc_counts WHERE key = 'k30'$$);
SELECT lookup_check($$SELECT count FROM lc_counts WHERE 'k42' = key$$);
-- never observed: no row, as in the function's result
SELECT lookup_check($$SELECT * FROM lc_counts WHERE key = 'nope'$$);
SELECT lookup_check($$SELECT * FROM lc_counts WHERE key IN ('k30', 'k31', 'k30', 'zz')$$);
SELECT lookup_check($$SELECT * FROM lc_counts WHERE key = ANY (ARRAY['k33', NULL, 'k34'])$$);
SELECT lookup_check($$SELECT * FROM lc_counts WHERE key = NULL$$);
-- another column's qual filters the rows found
SELECT lookup_check($$SELECT * FROM lc_counts WHERE key IN ('k30', 'k31') AND count > 5$$);
SELECT lookup_check($$SELECT key FROM lc_int_counts WHERE key = 42$$);
SELECT lookup_check($$SELECT * FROM lc_int_counts WHERE key IN (7, 120, 1000)$$);
-- no key qual, or one the lookup cannot use: the function scan
SELECT lookup_check($$SELECT count(*) FROM lc_counts WHERE count > 10$$);
SELECT lookup_check($$SELECT * FROM lc_counts WHERE key < 'k1' $$);
-- (the view's row is a row of its columns; the function's own row is
-- not a column the lookup returns)
SELECT lookup_check($$SELECT c FROM lc_counts c WHERE key = 'k30'$$);
SELECT lookup_check($$SELECT f FROM lert_counts('lc_gen', NULL::text) f WHERE key = 'k30'$$);
-- a key type whose equal values can differ in bytes: the function scan
CREATE TABLE lc_num (key numeric) USING lert;
INSERT INTO lc_num VALUES (1.0), (1.00), (2);
SELECT lookup_check($$SELECT * FROM lert_counts('lc_num', NULL::numeric) WHERE key = 1$$);
-- a prepared statement's generic plan
SET plan_cache_mode = force_generic_plan;
PREPARE lc_one(text) AS SELECT * FROM lc_counts WHERE key = $1;
EXPLAIN (COSTS OFF) EXECUTE lc_one('k7');
EXECUTE lc_one('k7');
EXECUTE lc_one('nope');
SELECT count = lert_count('lc_gen', 'k7'::text) AS as_lert_count FROM lert_counts('lc_gen', NULL::text) WHERE key = 'k7';
RESET plan_cache_mode;
-- a nested loop probes per outer row
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT lookup_check($$SELECT v.k, c.count FROM (VALUES ('k1'), ('k2'), ('zz'), ('k2')) v(k) JOIN lc_counts c ON c.key = v.k$$);
SELECT lookup_check($$SELECT v.k, c.count FROM (VALUES (1::bigint), (2), (500)) v(k) JOIN lc_int_counts c ON c.key = v.k$$);
RESET enable_hashjoin;
RESET enable_mergejoin;

-- the view binds the lert by its oid: renames follow, DROP needs CASCADE
ALTER TABLE lc_gen RENAME TO lc_gen2;
SELECT * FROM lc_counts WHERE key = 'k30';
SELECT pg_get_viewdef('lc_counts');
DROP TABLE lc_gen2;
ALTER TABLE lc_gen2 RENAME TO lc_gen;

-- privileges: the function (and its lookup) checks the caller's SELECT
-- on the lert, whatever view it is read through
CREATE ROLE lc_reader;
CREATE VIEW lc_counts_invoker WITH (security_invoker) AS
	SELECT * FROM lert_counts('lc_gen', NULL::text);
GRANT SELECT ON lc_counts, lc_counts_invoker TO lc_reader;
SET ROLE lc_reader;
SELECT * FROM lc_counts WHERE key = 'k30';
SELECT count(*) FROM lc_counts;
SELECT * FROM lc_counts_invoker WHERE key = 'k30';
RESET ROLE;
GRANT SELECT ON lc_gen TO lc_reader;
SET ROLE lc_reader;
SELECT * FROM lc_counts WHERE key = 'k30';
SELECT * FROM lc_counts_invoker WHERE key = 'k30';
RESET ROLE;
-- row-level security on the lert: refused, as lert_count is
ALTER TABLE lc_gen ENABLE ROW LEVEL SECURITY;
CREATE POLICY lc_some ON lc_gen FOR SELECT USING (key < 'k4');
SET ROLE lc_reader;
SELECT lert_count('lc_gen', 'k30'::text);
SELECT * FROM lc_counts WHERE key = 'k30';
SELECT count(*) FROM lc_counts;
RESET ROLE;
ALTER TABLE lc_gen DISABLE ROW LEVEL SECURITY;

-- a fresh session, the library not loaded yet: the first query through
-- the view still finds the lookup (the function's support loads it while
-- the planner sizes the call)
\c
SELECT COUNT(*) = 0 AS library_not_loaded_yet FROM pg_settings
	WHERE name = 'streamsketch.enable_lookup_scan';
EXPLAIN (COSTS OFF) SELECT * FROM lc_counts WHERE key = 'k30';
SELECT * FROM lc_counts WHERE key = 'k30';

DROP VIEW lc_counts, lc_counts_invoker, lc_int_counts;
DROP TABLE lc_gen, lc_truth, lc_int, lc_num;
DROP FUNCTION lookup_check(text);
DROP ROLE lc_reader;
