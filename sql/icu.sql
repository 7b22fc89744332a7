-- Nondeterministic collations (ICU): equal values may have other bytes.
-- A lert finds a key by its bytes: a key qual under such a collation, or
-- a key column of one, scans.  A cbt groups as GROUP BY does (the
-- collation's own hash): a key column of such a collation is looked up,
-- a qual under a collation other than the key's scans.  Every answer is
-- the scan's.  Skipped where the server has no ICU collations.
SELECT NOT EXISTS (SELECT FROM pg_collation WHERE collprovider = 'i') AS skip_test \gset
\if :skip_test
\quit
\endif
SET client_min_messages = warning;
-- the answers below are read after this session's own consolidation
SET streamsketch.background_consolidation = off;
-- the tables are small: a scan would be cheaper, but the paths are tested
SET enable_seqscan = off;

CREATE COLLATION icu_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);

\i sql/include/lookup_check.sql

-- a lert: a "C" key asked under the nondeterministic collation, and a
-- key column of that collation
CREATE TABLE icu_lert (key text COLLATE "C", count int) USING lert;
INSERT INTO icu_lert SELECT 'Key' || (i % 3), 1 FROM generate_series(1, 300) i;
SELECT lert_flush('icu_lert') >= 0 AS flushed;
SELECT lookup_check($$SELECT * FROM icu_lert WHERE key = 'key1' COLLATE icu_ci$$);
CREATE TABLE icu_lert_ci (key text COLLATE icu_ci) USING lert;
INSERT INTO icu_lert_ci SELECT 'Key' || (i % 3) FROM generate_series(1, 300) i;
SELECT lert_flush('icu_lert_ci') >= 0 AS flushed;
SELECT lookup_check($$SELECT * FROM icu_lert_ci WHERE key = 'key1'$$);

-- a cbt: the same two cases ('Key1' and 'key1' are one group of the
-- nondeterministic key, found by a lookup of 'KEY1')
SELECT cbt_create('icu_cbt', group_by => 'name text COLLATE "C"', aggregates => 'count(*) AS n');
INSERT INTO icu_cbt (name) SELECT 'Key' || (i % 3) FROM generate_series(1, 30) i;
SELECT lookup_check($$SELECT * FROM icu_cbt WHERE name = 'key1' COLLATE icu_ci$$);
SELECT cbt_create('icu_cbt_ci', group_by => 'name text COLLATE icu_ci', aggregates => 'count(*) AS n');
INSERT INTO icu_cbt_ci (name) SELECT (ARRAY['Key', 'key'])[1 + i % 2] || (i % 3) FROM generate_series(1, 30) i;
SELECT lookup_check($$SELECT count(*), sum(n) FROM icu_cbt_ci WHERE name = 'KEY1'$$);

DROP TABLE icu_lert, icu_lert_ci, icu_cbt, icu_cbt_ci;
DROP FUNCTION lookup_check(text);
DROP COLLATION icu_ci;
