-- Plain SQL on a partitioned parent of cbt, lert or bfile partitions:
-- partition pruning keeps the partitions the quals can reach, and each
-- is read by its lookup path (a cbt's groups, a lert's reports by key, a
-- bfile's time range), also with the pruning done at execution for a
-- generic plan's parameters; every answer equals the same query with the
-- lookups off.
SET client_min_messages = warning;
-- the answers below are read after this session's own consolidation
SET streamsketch.background_consolidation = off;
-- the partitions are small: a scan would be cheaper, but the paths are tested
SET enable_seqscan = off;

\i sql/include/lookup_check.sql

-- a cbt hash partitioned by its group key
CREATE TABLE pp_views (url text, hits bigint) PARTITION BY HASH (url);
SELECT cbt_create('pp_views_0', group_by => 'url text', aggregates => 'count(*) AS hits');
SELECT cbt_create('pp_views_1', group_by => 'url text', aggregates => 'count(*) AS hits');
ALTER TABLE pp_views ATTACH PARTITION pp_views_0 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
ALTER TABLE pp_views ATTACH PARTITION pp_views_1 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO pp_views (url) SELECT 'u' || (g % 50) FROM generate_series(1, 1000) g;
SELECT lookup_check($$SELECT * FROM pp_views WHERE url = 'u7'$$);
SELECT lookup_check($$SELECT * FROM pp_views WHERE url IN ('u7', 'u8', 'nope')$$);
-- a join probes through the parent per outer row
SELECT lookup_check($$SELECT v.url, p.hits FROM (VALUES ('u1'), ('u2'), ('x')) v(url)
                   JOIN pp_views p ON p.url = v.url$$);

-- a lert list partitioned by its key, with a default partition
CREATE TABLE pp_hh (key text) PARTITION BY LIST (key);
CREATE TABLE pp_hh_ab PARTITION OF pp_hh FOR VALUES IN ('a', 'b') USING lert;
CREATE TABLE pp_hh_other PARTITION OF pp_hh DEFAULT USING lert;
INSERT INTO pp_hh SELECT (ARRAY['a', 'b', 'c', 'd', 'e'])[1 + g % 5] FROM generate_series(1, 200) g;
SELECT lert_flush('pp_hh_ab') >= 0 AS flushed, lert_flush('pp_hh_other') >= 0 AS flushed;
SELECT lookup_check($$SELECT * FROM pp_hh WHERE key = 'c'$$);
SELECT lookup_check($$SELECT * FROM pp_hh WHERE key = 'a'$$);

-- a bfile range partitioned by its time column
CREATE TABLE pp_r (id int, ts int NOT NULL) PARTITION BY RANGE (ts);
SELECT bfile_create('pp_r_1', 'id int, ts int NOT NULL', sample_size => 100000, time_column => 'ts');
SELECT bfile_create('pp_r_2', 'id int, ts int NOT NULL', sample_size => 100000, time_column => 'ts');
ALTER TABLE pp_r ATTACH PARTITION pp_r_1 FOR VALUES FROM (0) TO (1000);
ALTER TABLE pp_r ATTACH PARTITION pp_r_2 FOR VALUES FROM (1000) TO (2000);
INSERT INTO pp_r SELECT g, g FROM generate_series(0, 1999) g;
SELECT lookup_check($$SELECT count(*), sum(ts) FROM pp_r WHERE ts BETWEEN 1500 AND 1509$$);
SELECT lookup_check($$SELECT count(*), sum(ts) FROM pp_r WHERE ts BETWEEN 995 AND 1004$$);

-- a generic plan prunes at execution and looks up in the partition kept
SET plan_cache_mode = force_generic_plan;
PREPARE pp_q(text) AS SELECT * FROM pp_views WHERE url = $1;
EXPLAIN (COSTS OFF, ANALYZE, TIMING OFF, SUMMARY OFF) EXECUTE pp_q('u7');
EXECUTE pp_q('u7');
DEALLOCATE pp_q;
RESET plan_cache_mode;

DROP TABLE pp_views, pp_hh, pp_r;
DROP FUNCTION lookup_check(text);
