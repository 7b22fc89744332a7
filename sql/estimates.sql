-- The planner's row estimates of the structures whose scans return rows
-- (relation_estimate_size, from the metapage): a lert's reports, a bfile's
-- sample, a cbt's groups as its last cbt_finalize counted them (else its
-- rows, at least as many); none for the others.
SET client_min_messages = warning;
-- the counts read below are what this session's reads consolidated
SET streamsketch.background_consolidation = off;
CREATE FUNCTION pg_temp.plan_rows(q text) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	j json;
BEGIN
	EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO j;
	RETURN (j -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END
$$;

-- a cbt of 5,000 groups in a tree of several levels
SELECT cbt_create('e_cbt', group_by => 'k int', aggregates => 'count(*) AS n',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 4);
INSERT INTO e_cbt (k) SELECT g % 5000 FROM generate_series(1, 100000) g;
SELECT count(*) AS groups FROM e_cbt;
SELECT pg_temp.plan_rows('SELECT * FROM public.e_cbt') AS rows_before_finalize;
SELECT cbt_finalize('e_cbt') AS groups;
SELECT pg_temp.plan_rows('SELECT * FROM public.e_cbt') AS groups_after_finalize;

-- a lert's reports
SELECT lert_create('e_lert', 'int', threshold => 10);
INSERT INTO e_lert SELECT g % 300 FROM generate_series(1, 30000) g;
SELECT count(*) AS reports FROM e_lert;
SELECT pg_temp.plan_rows('SELECT * FROM public.e_lert') AS lert_rows;

-- a bfile's sample
SELECT bfile_create('e_bfile', 'id int', sample_size => 1000);
INSERT INTO e_bfile SELECT g FROM generate_series(1, 50000) g;
-- (the scan draws the committed rows into the sample first)
CREATE TEMP TABLE e_sample AS SELECT count(*) AS n FROM e_bfile;
SELECT pg_temp.plan_rows('SELECT * FROM public.e_bfile') =
       (SELECT n FROM e_sample) AS bfile_rows_equal_the_sample;

-- a sketch's scan returns nothing: the planner's minimum
CREATE TABLE e_bcms (k int) USING bcms;
INSERT INTO e_bcms SELECT g FROM generate_series(1, 1000) g;
SELECT pg_temp.plan_rows('SELECT * FROM public.e_bcms') AS bcms_rows;

-- ANALYZE samples the rows the scans return: the planner gets their
-- columns' distinct values and widths (a group key is unique; every
-- group of the cbt counts 20 rows: one distinct count)
ANALYZE e_cbt, e_lert, e_bfile, e_bcms;
SELECT tablename, attname, null_frac, avg_width, n_distinct
FROM pg_stats WHERE tablename IN ('e_cbt', 'e_lert', 'e_bfile', 'e_bcms')
ORDER BY tablename, attname;
-- and counts them (the bfile's sample size is random: compared)
SELECT relname, CASE WHEN relname = 'e_bfile'
	THEN 'the sample: ' || (reltuples = (SELECT n FROM e_sample))
	ELSE reltuples::text END AS reltuples
FROM pg_class WHERE relname IN ('e_cbt', 'e_lert', 'e_bfile', 'e_bcms')
ORDER BY relname;
-- the lert's reports are 300 keys: a join's estimate uses their distinct
-- values (300 rows joined with 300 distinct keys on each side)
SELECT pg_temp.plan_rows('SELECT * FROM public.e_lert a JOIN public.e_lert b USING (key)')
	AS lert_self_join_rows;

-- one participant of a parallel scan produces all of a structure's rows:
-- no parallel plan, however cheap parallelism is made
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*), sum(n) FROM e_cbt;
EXPLAIN (COSTS OFF) SELECT count(*) FROM e_lert;
EXPLAIN (COSTS OFF) SELECT count(*) FROM e_bfile;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

-- TABLESAMPLE picks blocks and offsets, meaningless in a structure's file:
-- refused where the scan has rows, empty where it has none
SELECT * FROM e_cbt TABLESAMPLE BERNOULLI (50);
SELECT * FROM e_bfile TABLESAMPLE SYSTEM (50) REPEATABLE (1);
SELECT count(*) FROM e_bcms TABLESAMPLE BERNOULLI (100);
