-- bfile: samples; sample_agg, the in-memory sample aggregate
SET client_min_messages = warning;

-- n distinct values of the input, n at most the input's values
SELECT cardinality(s) AS n, (SELECT count(DISTINCT v) FROM unnest(s) v) AS distinct_values,
       (SELECT bool_and(v BETWEEN 1 AND 1000) FROM unnest(s) v) AS from_input
FROM (SELECT sample_agg(g, 5) AS s FROM generate_series(1, 1000) g) x;
SELECT sample_agg(g, 10) @> ARRAY[1, 2, 3] AND cardinality(sample_agg(g, 10)) = 3 AS all_three
FROM generate_series(1, 3) g;
SELECT pg_typeof(sample_agg(g::text, 2)), pg_typeof(sample_agg(g::numeric, 2, 1.0))
FROM generate_series(1, 10) g;
-- toasted values are sampled whole
SELECT min(length(v)) AS shortest FROM unnest((SELECT sample_agg(repeat('x', 100000 + g), 2)
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
