-- The set, info and writer functions on partitioned parents
-- (docs/partitions.md): lert_info, lert_reports, bfile_info,
-- bfile_subsample, bfile_window against the partitions' own answers; the
-- flush functions and qf_resize on every partition; qf_delete routed to
-- the key's partition; merges refused; privileges checked on the parent.
SET client_min_messages = warning;
SET streamsketch.background_consolidation = off;
CREATE FUNCTION sets_sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- ---- lert: hash, list (with a default) and range (one partition
-- sub-partitioned) parents by the key ----
CREATE TABLE ls_h (key int8) PARTITION BY HASH (key);
CREATE TABLE ls_h_0 PARTITION OF ls_h FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING lert;
CREATE TABLE ls_h_1 PARTITION OF ls_h FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING lert;
CREATE TABLE ls_l (key int8) PARTITION BY LIST (key);
CREATE TABLE ls_l_a PARTITION OF ls_l FOR VALUES IN (1, 2, 3, 4, 5) USING lert;
CREATE TABLE ls_l_d PARTITION OF ls_l DEFAULT USING lert;
CREATE TABLE ls_r (key int8) PARTITION BY RANGE (key);
CREATE TABLE ls_r_a PARTITION OF ls_r FOR VALUES FROM (MINVALUE) TO (20) USING lert;
CREATE TABLE ls_r_b PARTITION OF ls_r FOR VALUES FROM (20) TO (MAXVALUE) PARTITION BY HASH (key);
CREATE TABLE ls_r_b0 PARTITION OF ls_r_b FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING lert;
CREATE TABLE ls_r_b1 PARTITION OF ls_r_b FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING lert;
INSERT INTO ls_h SELECT g % 40 FROM generate_series(1, 2000) g;
INSERT INTO ls_l SELECT g % 40 FROM generate_series(1, 2000) g;
INSERT INTO ls_r SELECT g % 40 FROM generate_series(1, 2000) g;
-- flush on the parent: every partition, their results summed
SELECT lert_flush('ls_h') = lert_flush('ls_h_0') + lert_flush('ls_h_1') AS summed;
SELECT lert_flush('ls_l') >= 0 AS flushed, lert_flush('ls_r') >= 0 AS flushed;
SELECT (lert_info('ls_h')).pending_records, (lert_info('ls_l')).pending_records;

-- lert_info: parameters shared, counters summed (arrays element by element)
CREATE FUNCTION lert_info_check(parent regclass) RETURNS TABLE (
	observations_equal bool, reports_equal bool, level0_equal bool,
	levels_equal bool, pages_equal bool, threshold bigint, variant text,
	max_level0_ok bool) LANGUAGE sql AS $$
	WITH p AS (SELECT (lert_info(relid)).* FROM pg_partition_tree(parent) WHERE isleaf),
		 lv AS (SELECT i, sum(e) AS e FROM p, unnest(p.level_entries) WITH ORDINALITY u(e, i) GROUP BY i),
		 t AS (SELECT * FROM lert_info(parent))
	SELECT t.observations = (SELECT sum(observations) FROM p),
		   t.reports = (SELECT sum(reports) FROM p),
		   t.level0_entries = (SELECT sum(level0_entries) FROM p),
		   t.level_entries = (SELECT array_agg(e::bigint ORDER BY i) FROM lv),
		   t.relation_pages = (SELECT sum(relation_pages) FROM p),
		   t.threshold, t.variant,
		   t.max_level0_entries = (SELECT max(max_level0_entries) FROM p)
	FROM t $$;
SELECT * FROM lert_info_check('ls_h');
SELECT * FROM lert_info_check('ls_l');
SELECT * FROM lert_info_check('ls_r');

-- lert_reports: every partition's reports (their own ids, after applied to
-- each), merged by reported_at
CREATE FUNCTION lert_reports_check(parent regclass, after int8) RETURNS TABLE (
	reports bigint, missing bigint, extra bigint, in_time_order bool)
LANGUAGE sql AS $$
	WITH p AS (SELECT r.* FROM pg_partition_tree(parent) t, lert_reports(t.relid, after) r WHERE t.isleaf),
		 a AS (SELECT row_number() OVER () AS n, * FROM lert_reports(parent, after))
	SELECT (SELECT count(*) FROM a),
		   (SELECT count(*) FROM (SELECT * FROM p EXCEPT ALL SELECT report_id, key, count, first_position, reported_position, reported_at, cone FROM a) x),
		   (SELECT count(*) FROM (SELECT report_id, key, count, first_position, reported_position, reported_at, cone FROM a EXCEPT ALL SELECT * FROM p) x),
		   NOT EXISTS (SELECT FROM a a1 JOIN a a2 ON a2.n = a1.n + 1 WHERE a2.reported_at < a1.reported_at) $$;
SELECT * FROM lert_reports_check('ls_h', 0);
SELECT * FROM lert_reports_check('ls_l', 0);
SELECT * FROM lert_reports_check('ls_r', 0);
SELECT * FROM lert_reports_check('ls_h', 3);
SELECT count(*) AS keys, count(DISTINCT key) AS distinct_keys FROM lert_reports('ls_r', 0);
-- a parent without partitions: no reports, zero counters
CREATE TABLE ls_empty (key int8) PARTITION BY HASH (key);
SELECT count(*) FROM lert_reports('ls_empty', 0);
SELECT observations, reports, threshold FROM lert_info('ls_empty');

-- ---- bfile ----
-- uniform, every row kept (sample_size above the stream): list by grp,
-- seen 3:1; hash by id; range by the time column, one partition attached
-- with its columns in another order
CREATE TABLE bs_l (id int, grp int, ts int NOT NULL) PARTITION BY LIST (grp);
SELECT bfile_create('bs_l_0', 'id int, grp int, ts int NOT NULL', sample_size => 100000, time_column => 'ts') IS NOT NULL AS created;
SELECT bfile_create('bs_l_1', 'id int, grp int, ts int NOT NULL', sample_size => 100000, time_column => 'ts') IS NOT NULL AS created;
ALTER TABLE bs_l ATTACH PARTITION bs_l_0 FOR VALUES IN (0);
ALTER TABLE bs_l ATTACH PARTITION bs_l_1 FOR VALUES IN (1);
INSERT INTO bs_l SELECT g, (g % 4 = 0)::int, g FROM generate_series(1, 4000) g;
CREATE TABLE bs_h (id int, grp int, ts int NOT NULL) PARTITION BY HASH (id);
SELECT bfile_create('bs_h_0', 'id int, grp int, ts int NOT NULL', sample_size => 300, time_column => 'ts') IS NOT NULL AS created;
SELECT bfile_create('bs_h_1', 'id int, grp int, ts int NOT NULL', sample_size => 300, time_column => 'ts') IS NOT NULL AS created;
ALTER TABLE bs_h ATTACH PARTITION bs_h_0 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
ALTER TABLE bs_h ATTACH PARTITION bs_h_1 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO bs_h SELECT g, g % 4, g FROM generate_series(1, 5000) g;
CREATE TABLE bs_r (id int, grp int, ts int NOT NULL) PARTITION BY RANGE (ts);
SELECT bfile_create('bs_r_1', 'id int, grp int, ts int NOT NULL', sample_size => 100000, time_column => 'ts') IS NOT NULL AS created;
SELECT bfile_create('bs_r_2', 'ts int NOT NULL, grp int, id int', sample_size => 100000, time_column => 'ts') IS NOT NULL AS created;
ALTER TABLE bs_r ATTACH PARTITION bs_r_1 FOR VALUES FROM (0) TO (1000);
ALTER TABLE bs_r ATTACH PARTITION bs_r_2 FOR VALUES FROM (1000) TO (2000);
INSERT INTO bs_r SELECT g, g % 4, g FROM generate_series(0, 1999) g;

-- bfile_flush: every partition, their sample sizes summed
SELECT bfile_flush('bs_l') AS l, bfile_flush('bs_r') AS r,
	   bfile_flush('bs_h') = bfile_flush('bs_h_0') + bfile_flush('bs_h_1') AS h_summed;

-- bfile_info: sizes and counters summed, parameters shared
CREATE FUNCTION bfile_info_check(parent regclass) RETURNS TABLE (
	mode text, sample_size bigint, seen bigint, size_equal bool,
	seen_equal bool, added_equal bool, pages_equal bool, pending bigint)
LANGUAGE sql AS $$
	WITH p AS (SELECT (bfile_info(relid)).* FROM pg_partition_tree(parent) WHERE isleaf),
		 t AS (SELECT * FROM bfile_info(parent))
	SELECT t.mode, t.sample_size, t.seen,
		   t.size = (SELECT sum(size) FROM p), t.seen = (SELECT sum(seen) FROM p),
		   t.added = (SELECT sum(added) FROM p),
		   t.relation_pages = (SELECT sum(relation_pages) FROM p), t.pending_records
	FROM t $$;
SELECT * FROM bfile_info_check('bs_l');
SELECT * FROM bfile_info_check('bs_h');
SELECT * FROM bfile_info_check('bs_r');

-- bfile_window: every partition's window, in the parent's row type
CREATE FUNCTION bfile_window_check(lo int, hi int) RETURNS TABLE (
	rows bigint, missing bigint, extra bigint, as_select bool)
LANGUAGE sql AS $$
	WITH w AS (SELECT * FROM bfile_window(NULL::bs_r, lo, hi)),
		 p AS (SELECT id, grp, ts FROM bfile_window(NULL::bs_r_1, lo, hi)
			   UNION ALL SELECT id, grp, ts FROM bfile_window(NULL::bs_r_2, lo, hi))
	SELECT (SELECT count(*) FROM w),
		   (SELECT count(*) FROM (SELECT * FROM p EXCEPT ALL SELECT * FROM w) x),
		   (SELECT count(*) FROM (SELECT * FROM w EXCEPT ALL SELECT * FROM p) x),
		   NOT EXISTS (SELECT * FROM w EXCEPT ALL SELECT * FROM bs_r WHERE ts BETWEEN lo AND hi) AND
		   NOT EXISTS (SELECT * FROM bs_r WHERE ts BETWEEN lo AND hi EXCEPT ALL SELECT * FROM w) $$;
SELECT * FROM bfile_window_check(990, 1009);
SELECT * FROM bfile_window_check(100, 120);
SELECT * FROM bfile_window_check(1500, 1500);
SELECT * FROM bfile_window_check(3000, 4000);
SELECT count(*) AS rows, min(id) = min(ts) AS mapped FROM bfile_window(NULL::bs_h, 0, 100000);

-- bfile_subsample: n rows split by what each partition has seen (3:1),
-- uniform within each.  The share of grp 0 in 2000 of 4000 rows is
-- hypergeometric: 1500, sd 13.7; +-5 sd never fails in practice.
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_rows,
	   abs(count(*) FILTER (WHERE grp = 0) - 1500) <= 68 AS share_ok,
	   bool_and(grp = (id % 4 = 0)::int) AS rows_ok
FROM bfile_subsample(NULL::bs_l, 2000);
-- 300 draws of 400: the share of grp 0 over all of them, 3 of 4
-- (120000 rows, sd of the share 0.0012: +-5.5 sd)
SELECT count(*) AS rows, abs(avg((grp = 0)::int) - 0.75) < 0.0065 AS share_ok
FROM generate_series(1, 300) i, LATERAL bfile_subsample(NULL::bs_l, 400 + 0 * i);
SELECT count(*) FROM bfile_subsample(NULL::bs_l, 0);
SELECT count(*) FROM bfile_subsample(NULL::bs_l, 100000);
-- partitions that left rows out: at most the smallest such sample, whatever
-- n; every row from a partition's sample
SELECT count(*) = (SELECT min(size) FROM pg_partition_tree('bs_h') t, bfile_info(t.relid) WHERE t.isleaf) AS capped,
	   count(*) FILTER (WHERE s NOT IN (SELECT p FROM bs_h p)) AS not_sampled
FROM bfile_subsample(NULL::bs_h, 100000) s;
SELECT count(*) FROM bfile_subsample(NULL::bs_h, 50);
-- the parent's row type from a partition of another column order
SELECT count(*) AS rows, bool_and(id = ts) AS mapped FROM bfile_subsample(NULL::bs_r, 500);
-- ---- bfile_subsample of weighted partitions ----
-- Each partition's sample thinned to the smallest inclusion scale
-- t* = α^(L*−1) among them, so that the union holds a row of weight w with
-- probability min(1, w·t*); then n of its rows chosen uniformly.  Light
-- rows (w = 1) go to one partition, heavy ones (w = 8) to the other (its
-- columns in another order): 48000 light rows fill bs_w_1 to level 8
-- (375 rows expected at t = 1/128, 750 > 500 at level 7), 1500 heavy rows
-- bs_w_8 to level 6 (8·1500/32 = 375 rows), each 6 sd or more from
-- another level.
CREATE TABLE bs_w (id int, w float8) PARTITION BY LIST (w);
SELECT bfile_create('bs_w_1', 'id int, w float8', sample_size => 500, min_fraction => 0.5,
					mode => 'weighted', weight_column => 'w') IS NOT NULL AS created;
SELECT bfile_create('bs_w_8', 'w float8, id int', sample_size => 500, min_fraction => 0.5,
					mode => 'weighted', weight_column => 'w') IS NOT NULL AS created;
ALTER TABLE bs_w ATTACH PARTITION bs_w_1 FOR VALUES IN (1);
ALTER TABLE bs_w ATTACH PARTITION bs_w_8 FOR VALUES IN (8);
INSERT INTO bs_w SELECT g, 1 FROM generate_series(1, 48000) g;
INSERT INTO bs_w SELECT 100000 + g, 8 FROM generate_series(1, 1500) g;
SELECT bfile_flush('bs_w') > 0 AS flushed;
SELECT t.relid, i.level, i.inclusion_probability
FROM pg_partition_tree('bs_w') t, bfile_info(t.relid) i WHERE t.isleaf ORDER BY 1;
-- whole: every row of the light sample (already at t*), each heavy row
-- with probability min(1, 8·t*) / min(1, 8·t_8) (1/4, heavy rows below
-- saturation at both levels); over 200 draws the mean number of heavy
-- rows is within 5 sd of its expectation, 1/4 of bs_w_8's sample.  In one
-- draw, the kept fractions of the heavy and light rows of the stream are
-- about 8 to 1, as the inclusion min(1, w·t*) says (±5 sd of that ratio).
CREATE TABLE bs_w_draws AS
SELECT i, count(*) FILTER (WHERE w = 1) AS light, count(*) FILTER (WHERE w = 8) AS heavy,
	   count(*) FILTER (WHERE (id, w) NOT IN (SELECT id, w FROM bs_w_1 UNION ALL SELECT id, w FROM bs_w_8)) AS not_sampled,
	   count(*) - count(DISTINCT id) AS duplicates
FROM generate_series(1, 200) i, LATERAL bfile_subsample(NULL::bs_w, 100000 + 0 * i) GROUP BY i;
WITH lv AS (SELECT (bfile_info('bs_w_1')).level AS l1, (bfile_info('bs_w_8')).level AS l8,
				   (bfile_info('bs_w_1')).size AS s1, (bfile_info('bs_w_8')).size AS s8),
	 e AS (SELECT *, least(1, 8 * 0.5 ^ (l1 - 1)) / least(1, 8 * 0.5 ^ (l8 - 1)) AS keep,
				  least(1, 0.5 ^ (l1 - 1)) AS p_light, least(1, 8 * 0.5 ^ (l1 - 1)) AS p_heavy FROM lv),
	 one AS (SELECT light, heavy, (heavy / 1500.0) / (light / 48000.0) AS ratio FROM bs_w_draws WHERE i = 1)
SELECT l1 > l8 AS levels_differ, p_heavy < 1 AS below_saturation,
	   (SELECT sum(not_sampled) + sum(duplicates) FROM bs_w_draws) AS foreign_or_twice,
	   (SELECT bool_and(light = s1) FROM bs_w_draws) AS light_whole,
	   abs((SELECT avg(heavy) FROM bs_w_draws) - s8 * keep) <= 5 * sqrt(s8 * keep * (1 - keep) / 200) AS heavy_rate_ok,
	   abs(ratio - 8) <= 5 * 8 * sqrt((1 - p_heavy) / (1500 * p_heavy) + (1 - p_light) / (48000 * p_light)) AS ratio_ok
FROM e, one;
-- n below the union's size: exactly n rows, no row twice, each from a
-- partition's sample; over 200 draws of 200 the heavy share is the
-- union's, (s8/4) / (s8/4 + s1) (±5 sd: the choice's binomial spread and
-- that of the heavy rows kept)
WITH d AS (SELECT i, count(*) AS n, count(DISTINCT id) AS distinct_ids,
				  count(*) FILTER (WHERE w = 8) AS heavy,
				  count(*) FILTER (WHERE (id, w) NOT IN (SELECT id, w FROM bs_w_1 UNION ALL SELECT id, w FROM bs_w_8)) AS not_sampled
		   FROM generate_series(1, 200) i, LATERAL bfile_subsample(NULL::bs_w, 200 + 0 * i) GROUP BY i),
	 s AS (SELECT (bfile_info('bs_w_1')).size AS s1, (bfile_info('bs_w_8')).size AS s8),
	 e AS (SELECT s8 / 4.0 / (s8 / 4.0 + s1) AS share,
				  sqrt(s8 * 3 / 16.0) / (s8 / 4.0 + s1) * s1 / (s8 / 4.0 + s1) AS union_sd FROM s)
SELECT bool_and(n = 200) AS exact, bool_and(distinct_ids = n) AS no_twice, sum(not_sampled) AS not_sampled,
	   abs(sum(heavy) / 40000.0 - share) <= 5 * sqrt(share * (1 - share) / 40000 + union_sd ^ 2 / 200) AS share_ok
FROM d, e GROUP BY share, union_sd;
SELECT count(*) FROM bfile_subsample(NULL::bs_w, 0);
-- the partition at the smaller inclusion read last: the union so far is
-- thinned again.  Weights 1: 3000 rows take bs_wr_a to level 4 (375
-- expected, 750 at level 3), 48000 rows bs_wr_b to level 8; every row of
-- bs_wr_b's sample is in the union, each of bs_wr_a's with probability
-- 1/16 (the mean over 200 draws within 5 sd)
CREATE TABLE bs_wr (id int, w float8) PARTITION BY RANGE (id);
SELECT bfile_create('bs_wr_a', 'id int, w float8', sample_size => 500, min_fraction => 0.5,
					mode => 'weighted', weight_column => 'w') IS NOT NULL AS created;
SELECT bfile_create('bs_wr_b', 'id int, w float8', sample_size => 500, min_fraction => 0.5,
					mode => 'weighted', weight_column => 'w') IS NOT NULL AS created;
ALTER TABLE bs_wr ATTACH PARTITION bs_wr_a FOR VALUES FROM (0) TO (100000);
ALTER TABLE bs_wr ATTACH PARTITION bs_wr_b FOR VALUES FROM (100000) TO (MAXVALUE);
INSERT INTO bs_wr SELECT g, 1 FROM generate_series(1, 3000) g;
INSERT INTO bs_wr SELECT 100000 + g, 1 FROM generate_series(1, 48000) g;
SELECT (bfile_info('bs_wr_a')).level AS level_a, (bfile_info('bs_wr_b')).level AS level_b;
WITH d AS (SELECT i, count(*) FILTER (WHERE id < 100000) AS a, count(*) FILTER (WHERE id >= 100000) AS b
		   FROM generate_series(1, 200) i, LATERAL bfile_subsample(NULL::bs_wr, 100000 + 0 * i) GROUP BY i),
	 s AS (SELECT (bfile_info('bs_wr_a')).size AS sa, (bfile_info('bs_wr_b')).size AS sb)
SELECT bool_and(b = sb) AS b_whole, abs(avg(a) - sa / 16.0) <= 5 * sqrt(sa / 16.0 * 15 / 16 / 200) AS a_rate_ok
FROM d, s GROUP BY sa, sb;
-- refused: a decayed partition (its rows' ages are in its own levels), a
-- mixture of modes, partitions weighing by different columns
CREATE TABLE bs_wd (id int, w float8) PARTITION BY HASH (id);
SELECT bfile_create('bs_wd_0', 'id int, w float8', mode => 'weighted_decayed', weight_column => 'w') IS NOT NULL AS created;
ALTER TABLE bs_wd ATTACH PARTITION bs_wd_0 FOR VALUES WITH (MODULUS 1, REMAINDER 0);
\set VERBOSITY default
SELECT * FROM bfile_subsample(NULL::bs_wd, 10);
\set VERBOSITY terse
SELECT count(*) FROM bfile_window(NULL::bs_wd, 0, 10);
CREATE TABLE bs_wm (id int, w float8, v float8) PARTITION BY LIST (id);
SELECT bfile_create('bs_wm_w', 'id int, w float8, v float8', mode => 'weighted', weight_column => 'w') IS NOT NULL AS created;
SELECT bfile_create('bs_wm_v', 'id int, w float8, v float8', mode => 'weighted', weight_column => 'v') IS NOT NULL AS created;
SELECT bfile_create('bs_wm_u', 'id int, w float8, v float8') IS NOT NULL AS created;
ALTER TABLE bs_wm ATTACH PARTITION bs_wm_w FOR VALUES IN (1);
ALTER TABLE bs_wm ATTACH PARTITION bs_wm_u FOR VALUES IN (2);
\set VERBOSITY default
SELECT * FROM bfile_subsample(NULL::bs_wm, 10);
ALTER TABLE bs_wm DETACH PARTITION bs_wm_u;
ALTER TABLE bs_wm ATTACH PARTITION bs_wm_v FOR VALUES IN (3);
SELECT * FROM bfile_subsample(NULL::bs_wm, 10);
\set VERBOSITY terse
-- weighted partitions without rows: an empty sample
ALTER TABLE bs_wm DETACH PARTITION bs_wm_v;
SELECT count(*) FROM bfile_subsample(NULL::bs_wm, 10);
DROP TABLE bs_w_draws, bs_wm_u, bs_wm_v;

-- ---- writers of the other structures ----
CREATE TABLE ws_q (k int) PARTITION BY HASH (k);
CREATE TABLE ws_q_0 PARTITION OF ws_q FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING quotient_filter;
CREATE TABLE ws_q_1 PARTITION OF ws_q FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING quotient_filter;
CREATE TABLE ws_qx (k int) PARTITION BY LIST ((k % 2));
CREATE TABLE ws_qx_0 PARTITION OF ws_qx FOR VALUES IN (0) USING quotient_filter;
CREATE TABLE ws_qx_1 PARTITION OF ws_qx FOR VALUES IN (1) USING quotient_filter;
CREATE TABLE ws_b (k int) PARTITION BY HASH (k);
CREATE TABLE ws_b_0 PARTITION OF ws_b FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING bcms;
CREATE TABLE ws_b_1 PARTITION OF ws_b FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING bcms;
CREATE TABLE ws_f (k int) PARTITION BY HASH (k);
CREATE TABLE ws_f_0 PARTITION OF ws_f FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING bloom_filter;
CREATE TABLE ws_f_1 PARTITION OF ws_f FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING bloom_filter;
INSERT INTO ws_q SELECT g % 50 FROM generate_series(1, 500) g;
INSERT INTO ws_qx SELECT g % 50 FROM generate_series(1, 500) g;
INSERT INTO ws_b SELECT g % 50 FROM generate_series(1, 500) g;
INSERT INTO ws_f SELECT g % 50 FROM generate_series(1, 500) g;
SELECT qf_flush('ws_q') AS items, qf_flush('ws_q') = qf_flush('ws_q_0') + qf_flush('ws_q_1') AS summed;
SELECT bcms_flush('ws_b') >= 0 AS flushed, bloom_flush('ws_f') >= 0 AS flushed;
SELECT (bcms_info('ws_b')).pending_records, (bloom_info('ws_f')).pending_records,
	   (qf_info('ws_q')).pending_records;
SELECT bcms_estimate('ws_b', 7) AS estimate, bloom_contains('ws_f', 7) AS contains;
-- qf_delete: in the partition that holds the key
SELECT qf_count('ws_q', 7) AS before;
SELECT qf_delete('ws_q', 7, 3);
SELECT qf_count('ws_q', 7) AS after, qf_count('ws_q_0', 7) + qf_count('ws_q_1', 7) AS partitions;
-- a key no partition accepts: nothing to delete; sub-partitions routed
CREATE TABLE ws_ql (k int) PARTITION BY LIST (k);
CREATE TABLE ws_ql_a PARTITION OF ws_ql FOR VALUES IN (1, 2) PARTITION BY HASH (k);
CREATE TABLE ws_ql_a0 PARTITION OF ws_ql_a FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING quotient_filter;
CREATE TABLE ws_ql_a1 PARTITION OF ws_ql_a FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING quotient_filter;
INSERT INTO ws_ql VALUES (1), (1), (2);
SELECT qf_delete('ws_ql', 99), qf_delete('ws_ql', 1);
SELECT qf_count('ws_ql', 1) AS count_1, qf_count('ws_ql', 2) AS count_2;
-- qf_resize: every partition, pages summed; contents kept
SELECT qf_resize('ws_q') = (SELECT sum(pages) FROM pg_partition_tree('ws_q') t, qf_info(t.relid) WHERE t.isleaf) AS resized,
	   (qf_info('ws_q')).items, qf_count('ws_q', 8) AS count_8;
-- refusals
SELECT stmt, sets_sqlstate_of(stmt) FROM (VALUES
	('SELECT qf_delete(''ws_qx'', 7)'),
	('SELECT qf_merge(''ws_q'', ''ws_qx_0'')'),
	('SELECT qf_merge(''ws_q_0'', ''ws_qx'')'),
	('SELECT qf_merge_value(''ws_q'', qfilter_agg(1, 100, 0.01))'),
	('SELECT bcms_merge(''ws_b'', cms_agg(1, 0.01, 0.01))'),
	('SELECT lert_flush(''bs_l'')'),
	('SELECT bfile_flush(''ls_h'')')) v(stmt);
\set VERBOSITY default
SELECT qf_delete('ws_qx', 7);
\set VERBOSITY terse

-- ---- privileges: the parent's ----
CREATE ROLE regress_sets_reader;
GRANT SELECT ON ls_h, bs_l, bs_r, ws_q, ws_b TO regress_sets_reader;
SET ROLE regress_sets_reader;
SELECT count(*) > 0 AS reports FROM lert_reports('ls_h', 0);
SELECT (lert_info('ls_h')).observations, (bfile_info('bs_l')).seen;
SELECT count(*) FROM bfile_window(NULL::bs_r, 990, 1009);
SELECT count(*) FROM bfile_subsample(NULL::bs_l, 10);
SELECT stmt, sets_sqlstate_of(stmt) FROM (VALUES
	('SELECT lert_flush(''ls_h'')'),
	('SELECT bfile_flush(''bs_l'')'),
	('SELECT qf_flush(''ws_q'')'),
	('SELECT bcms_flush(''ws_b'')'),
	('SELECT qf_delete(''ws_q'', 7)'),
	('SELECT qf_resize(''ws_q'')'),
	('SELECT count(*) FROM lert_reports(''ls_h_0'', 0)'),
	('SELECT count(*) FROM lert_reports(''ls_l'', 0)')) v(stmt);
RESET ROLE;
-- row-level security on the parent: the row functions refuse, info stays
ALTER TABLE bs_l ENABLE ROW LEVEL SECURITY;
CREATE POLICY p ON bs_l USING (grp = 0);
SET ROLE regress_sets_reader;
SELECT sets_sqlstate_of('SELECT count(*) FROM bfile_subsample(NULL::bs_l, 10)');
SELECT sets_sqlstate_of('SELECT count(*) FROM bfile_window(NULL::bs_l, 0, 10)');
SELECT (bfile_info('bs_l')).seen;
RESET ROLE;
REVOKE ALL ON ls_h, bs_l, bs_r, ws_q, ws_b FROM regress_sets_reader;
DROP ROLE regress_sets_reader;

RESET streamsketch.background_consolidation;
DROP TABLE ls_h, ls_l, ls_r, ls_empty, bs_l, bs_h, bs_r, bs_w, bs_wr, bs_wd, bs_wm, ws_q, ws_qx, ws_ql, ws_b, ws_f;
DROP FUNCTION sets_sqlstate_of(text), lert_info_check(regclass), lert_reports_check(regclass, int8),
	bfile_info_check(regclass), bfile_window_check(int, int);
