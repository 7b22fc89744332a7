-- A transaction's key records are combined per key before they enter the
-- change log (bcms, bloom_filter, quotient filters), and a cbt's input rows
-- per group: the log holds one record per distinct key or group, and every
-- answer and count stays exact.
\set VERBOSITY default
SET client_min_messages = warning;
-- the logs below are read before any consolidation: this session's commits
-- queue nothing for a background worker
SET streamsketch.background_consolidation = off;
LOAD 'streamsketch';

-- 100,000 rows of 100 keys: 100 records of 32 bytes (each stands for its
-- rows, which are its weight), appended at commit
SELECT bcms_create('cb', 'int8');
BEGIN;
INSERT INTO cb SELECT g % 100 FROM generate_series(1, 100000) g;
SELECT log_records, log_bytes FROM streamsketch_log_info('cb');
-- the transaction's own reads see its uncombined records
SELECT bcms_estimate('cb', 7) AS own_estimate;
COMMIT;
SELECT log_records, log_bytes FROM streamsketch_log_info('cb');

-- the same rows in transactions too small to be combined (1,000 rows each)
SELECT bcms_create('cb_ref', 'int8');
DO $$
BEGIN
	FOR i IN 0..99 LOOP
		INSERT INTO cb_ref SELECT g % 100 FROM generate_series(i * 1000 + 1, i * 1000 + 1000) g;
		COMMIT;
	END LOOP;
END $$;
-- identical estimates, never below the exact counts (1,000 each), and
-- the same rows and weight
SELECT count(*) FILTER (WHERE bcms_estimate('cb', k) <> bcms_estimate('cb_ref', k)) AS differ,
	   count(*) FILTER (WHERE bcms_estimate('cb', k) < 1000) AS under
FROM generate_series(0, 99) k;
SELECT a.items, a.total_weight, b.items AS ref_items, b.total_weight AS ref_total
FROM bcms_info('cb') a, bcms_info('cb_ref') b;
-- and after consolidation
SELECT bcms_flush('cb') >= 0 AS flushed, bcms_flush('cb_ref') >= 0 AS ref_flushed;
SELECT count(*) FILTER (WHERE bcms_estimate('cb', k) <> bcms_estimate('cb_ref', k)) AS differ
FROM generate_series(0, 99) k;
SELECT items, total_weight, buffered_entries FROM bcms_info('cb');

-- against the in-memory cms of the same rows (same geometry and seed)
SELECT count(*) FILTER (WHERE bcms_estimate('cb', k) <> cms_estimate(s, k)) AS differ_from_cms
FROM (SELECT cms_agg(g % 100, 0.001, 0.01) AS s FROM generate_series(1, 100000) g) c,
	 generate_series(0, 99) k;

-- a weighted sketch: combined records keep their rows apart from their
-- weight (40 bytes)
SELECT bcms_create('cbw', 'int8', weighted => true);
INSERT INTO cbw SELECT g % 10, 3 FROM generate_series(1, 2000) g;
SELECT log_records, log_bytes FROM streamsketch_log_info('cbw');
SELECT items, total_weight FROM bcms_info('cbw');
SELECT bcms_estimate('cbw', 4);
-- weights whose sum overflows are not combined (three records): the
-- counter saturates as it would with the rows apart
SELECT bcms_create('cbo', 'int8', weighted => true);
INSERT INTO cbo SELECT 100 + (g > 1022)::int, CASE WHEN g > 1022 THEN 5000000000000000000 ELSE 1 END
FROM generate_series(1, 1024) g;
SELECT log_records FROM streamsketch_log_info('cbo');
SELECT bcms_estimate('cbo', 100) AS est_100, bcms_estimate('cbo', 101) AS est_101;
SELECT items FROM bcms_info('cbo');

-- a small transaction is appended as it is (under 1,024 records)
SELECT bcms_create('cbs', 'int8');
INSERT INTO cbs SELECT 1 FROM generate_series(1, 1000);
SELECT log_records, log_bytes FROM streamsketch_log_info('cbs');

-- a conservative sketch: combining reorders updates of different keys,
-- which leaves every estimate at or above the exact count
SELECT bcms_create('cbc', 'int8', epsilon => 0.05, conservative => true);
INSERT INTO cbc SELECT (g * 7919) % 300 FROM generate_series(1, 30000) g;
SELECT log_records FROM streamsketch_log_info('cbc');
SELECT count(*) FILTER (WHERE bcms_estimate('cbc', k) < 100) AS under
FROM generate_series(0, 299) k;
SELECT items, total_weight FROM bcms_info('cbc');

-- savepoints: what a rolled-back subtransaction added is not combined in
SELECT bcms_create('cbp', 'int8');
BEGIN;
INSERT INTO cbp SELECT g % 10 FROM generate_series(1, 3000) g;
SAVEPOINT s;
INSERT INTO cbp SELECT g % 10 FROM generate_series(1, 3000) g;
ROLLBACK TO s;
INSERT INTO cbp SELECT 1 FROM generate_series(1, 10);
COMMIT;
SELECT log_records, log_bytes FROM streamsketch_log_info('cbp');
SELECT bcms_estimate('cbp', 1) AS est_1, bcms_estimate('cbp', 2) AS est_2;
SELECT items, total_weight FROM bcms_info('cbp');

-- TRUNCATE in the transaction: only the records after it are combined
BEGIN;
INSERT INTO cbp SELECT g % 10 FROM generate_series(1, 3000) g;
TRUNCATE cbp;
INSERT INTO cbp SELECT g % 3 FROM generate_series(1, 3000) g;
COMMIT;
SELECT log_records FROM streamsketch_log_info('cbp');
SELECT bcms_estimate('cbp', 1) AS est_1, bcms_estimate('cbp', 5) AS est_5;
SELECT items, total_weight FROM bcms_info('cbp');

-- a small work_mem: the table is emptied into the log whenever it is full
-- (1,638 keys in 64kB), so keys get several records, counts stay exact
SELECT setseed(0.25);
CREATE TEMP TABLE skewed AS
	SELECT floor(5000 * power(random(), 3))::int8 AS key FROM generate_series(1, 50000);
CREATE TEMP TABLE skewed_exact AS SELECT key, count(*) AS n FROM skewed GROUP BY key;
SELECT count(*) > 1638 AS more_keys_than_the_table FROM skewed_exact;
SET work_mem = '64kB';
SELECT bcms_create('cbm', 'int8');
INSERT INTO cbm SELECT key FROM skewed;
SELECT log_records > (SELECT count(*) FROM skewed_exact) AS keys_in_several_records,
	   log_records < 40000 AS combined
FROM streamsketch_log_info('cbm');
SELECT items, total_weight FROM bcms_info('cbm');
SELECT count(*) FILTER (WHERE bcms_estimate('cbm', key) < n) AS under
FROM skewed_exact;
RESET work_mem;

-- quotient filter: inserts and deletes of one key in one transaction keep
-- its exact count, each delete applied after the inserts before it
SELECT qf_create('cq', 'int8', capacity => 10000);
BEGIN;
INSERT INTO cq SELECT g % 50 FROM generate_series(1, 5000) g;
SELECT qf_delete('cq', 7, 30);
INSERT INTO cq SELECT 7 FROM generate_series(1, 5);
SELECT qf_delete('cq', 8, 100);
INSERT INTO cq SELECT 8 FROM generate_series(1, 3);
SELECT qf_count('cq', 7) AS own_7, qf_count('cq', 8) AS own_8;
COMMIT;
SELECT log_records FROM streamsketch_log_info('cq');
SELECT qf_count('cq', 7) AS c7, qf_count('cq', 8) AS c8, qf_count('cq', 9) AS c9;
VACUUM cq;
SELECT qf_count('cq', 7) AS c7, qf_count('cq', 8) AS c8, qf_count('cq', 9) AS c9;
SELECT items, total_count FROM qf_info('cq');

-- a cascade filter: the same
SELECT qf_create('cqc', 'int8', capacity => 10000, access_method => 'cascade_filter');
BEGIN;
INSERT INTO cqc SELECT g % 20 FROM generate_series(1, 2000) g;
SELECT qf_delete('cqc', 3, 100);
INSERT INTO cqc SELECT 3 FROM generate_series(1, 2);
COMMIT;
SELECT log_records FROM streamsketch_log_info('cqc');
SELECT qf_count('cqc', 3) AS c3, qf_count('cqc', 4) AS c4;

-- Bloom filter: one record per key, and items still counts every row
SELECT bloom_create('cbf', 'int8', capacity => 10000);
INSERT INTO cbf SELECT g % 200 FROM generate_series(1, 20000) g;
SELECT log_records, log_bytes FROM streamsketch_log_info('cbf');
SELECT items FROM bloom_info('cbf');
SELECT count(*) FILTER (WHERE NOT bloom_contains('cbf', k)) AS missing
FROM generate_series(0, 199) k;
SELECT bloom_flush('cbf') >= 0 AS flushed;
SELECT items FROM bloom_info('cbf');
SELECT count(*) FILTER (WHERE NOT bloom_contains('cbf', k)) AS missing
FROM generate_series(0, 199) k;

-- cbt: a transaction's input rows are aggregated per group at commit by
-- the transition functions, as a round aggregates them, and logged as one
-- partial aggregate per group, in the order of each group's first row
CREATE TEMP TABLE cbt_rows AS
	SELECT g % 100 AS k, g::int8 AS v, ((g % 7) / 4.0)::float8 AS f
	FROM generate_series(1, 100000) g;
SELECT cbt_create('ccb', group_by => 'k int',
                  aggregates => 'count(*) AS n, sum(v::bigint) AS sv, min(v::bigint) AS mn,
                                 max(f::float8) AS mf, avg(v::bigint) AS av');
CREATE TEMP VIEW ccb_expected AS
	SELECT k, count(*) AS n, sum(v) AS sv, min(v) AS mn, max(f) AS mf, avg(v) AS av
	FROM cbt_rows GROUP BY k;
BEGIN;
INSERT INTO ccb (k, v, f) SELECT k, v, f FROM cbt_rows;
-- the transaction's own reads see its rows
SELECT k, n, sv, mn, mf, av FROM cbt_lookup(NULL::ccb, 7);
SELECT count(*) AS groups, sum(n) AS n FROM ccb;
COMMIT;
SELECT log_records FROM streamsketch_log_info('ccb');
SELECT rows, pending_records FROM cbt_info('ccb');
-- the table, and each group's lookup, equal GROUP BY over the same rows
SELECT k, n, sv, mn, mf, av FROM ccb ORDER BY k LIMIT 3;
SELECT count(*) AS groups,
       count(*) FILTER (WHERE c.k IS NULL OR t.k IS NULL) AS missing,
       count(*) FILTER (WHERE (c.n, c.sv, c.mn, c.mf, c.av) IS DISTINCT FROM
                              (t.n, t.sv, t.mn, t.mf, t.av)) AS wrong
FROM ccb_expected t FULL JOIN ccb c USING (k);
SELECT count(*) FILTER (WHERE (l.n, l.sv, l.mn, l.mf, l.av) IS DISTINCT FROM
                              (t.n, t.sv, t.mn, t.mf, t.av)) AS lookup_wrong
FROM ccb_expected t LEFT JOIN LATERAL cbt_lookup(NULL::ccb, t.k) l ON true;
-- consolidated, the tree counts every input row the partial aggregates
-- stand for
SELECT cbt_finalize('ccb') AS groups;
SELECT rows, pending_records FROM cbt_info('ccb');
SELECT count(*) FILTER (WHERE (c.n, c.sv, c.mn, c.mf, c.av) IS DISTINCT FROM
                              (t.n, t.sv, t.mn, t.mf, t.av)) AS wrong
FROM ccb_expected t FULL JOIN ccb c USING (k);

-- savepoints: what a rolled-back subtransaction added is not combined in;
-- a group inserted with its values (as a dump writes it) is logged as it
-- is, after the groups of the rows before it
SELECT cbt_create('ccp', group_by => 'k int',
                  aggregates => 'count(*) AS n, sum(v::int) AS sv, max(v::int) AS mx');
BEGIN;
INSERT INTO ccp (k, v) SELECT g % 10, g FROM generate_series(1, 3000) g;
SAVEPOINT s;
INSERT INTO ccp (k, v) SELECT g % 10, g FROM generate_series(1, 3000) g;
ROLLBACK TO s;
INSERT INTO ccp VALUES (1, 5, 100000, 100000, NULL);
INSERT INTO ccp (k, v) SELECT 1, 1 FROM generate_series(1, 10);
COMMIT;
SELECT log_records FROM streamsketch_log_info('ccp');
SELECT k, n, sv, mx FROM ccp ORDER BY k;
SELECT rows FROM cbt_info('ccp');
SELECT cbt_finalize('ccp') AS groups;
SELECT rows FROM cbt_info('ccp');
SELECT k, n, sv, mx FROM ccp WHERE k IN (1, 2) ORDER BY k;

-- a small work_mem: the groups held are logged whenever they fill it, so
-- a group may have several records, and every group stays exact
-- (2,000 groups of 10 rows each, twice over: 40,000 rows)
SET work_mem = '64kB';
SELECT cbt_create('ccm', group_by => 'k int', aggregates => 'count(*) AS n, sum(v::bigint) AS sv');
INSERT INTO ccm (k, v) SELECT (g / 10) % 2000, g FROM generate_series(0, 39999) g;
SELECT log_records > 2000 AS groups_in_several_records,
       log_records < 8000 AS combined
FROM streamsketch_log_info('ccm');
RESET work_mem;
SELECT count(*) AS groups,
       count(*) FILTER (WHERE c.k IS NULL OR (c.n, c.sv) IS DISTINCT FROM (t.n, t.sv)) AS wrong
FROM (SELECT (g / 10) % 2000 AS k, count(*) AS n, sum(g) AS sv
      FROM generate_series(0, 39999) g GROUP BY 1) t
LEFT JOIN ccm c USING (k);

-- an aggregate that fails while the rows are combined fails the COMMIT,
-- as a deferred constraint does: nothing of the transaction is committed
CREATE AGGREGATE sum4(int4) (sfunc = int4pl, stype = int4, combinefunc = int4pl);
SELECT cbt_create('cce', group_by => 'k int', aggregates => 'sum4(v::int) AS s');
INSERT INTO cce (k, v) SELECT 1, 1 FROM generate_series(1, 2000);
BEGIN;
INSERT INTO cce (k, v) SELECT 2, 1 FROM generate_series(1, 2000);
INSERT INTO cce (k, v) VALUES (3, 2000000000), (3, 2000000000);
COMMIT;
SELECT log_records FROM streamsketch_log_info('cce');
SELECT k, s FROM cce ORDER BY k;

DROP TABLE cb, cb_ref, cbw, cbo, cbs, cbc, cbp, cbm, cq, cqc, cbf, ccb, ccp, ccm, cce;
DROP AGGREGATE sum4(int4);
