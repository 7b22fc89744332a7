-- lert: every key is reported exactly once after its T-th committed
-- observation, with the exact count and first position at the report and
-- within its variant's bound; counts are exact per key (colliding
-- fingerprints never merge two keys); nothing uncommitted counts.
SET client_min_messages = warning;
-- the counters and reports below are read after this session's own
-- consolidation: its commits queue nothing for a background worker,
-- which would hold the consolidation lock meanwhile
SET streamsketch.background_consolidation = off;
LOAD 'streamsketch';

-- A stream of 2,000 keys whose lifetime counts run from 1 to 60 (so that
-- keys end below, at and above T = 24 and T + sum(tau)), interleaved by a
-- hash; positions are the order of insertion.
CREATE TABLE lt_stream AS
SELECT row_number() OVER (ORDER BY md5(k::text || ':' || j::text)) - 1 AS pos,
       k::int8 AS k
FROM generate_series(1, 2000) k,
     generate_series(1, 1 + (k * 7919) % 60) j;
SELECT sum(c) AS observations, count(*) AS keys,
       count(*) FILTER (WHERE c >= 24) AS heavy,
       count(*) FILTER (WHERE c >= 38) AS above_count_stretch_bound
FROM (SELECT k, count(*) AS c FROM lt_stream GROUP BY k) s;

CREATE INDEX ON lt_stream (k, pos);
ANALYZE lt_stream;

-- the offline truth: each key's count, first position and T-th position
CREATE TABLE lt_truth AS
SELECT k, count(*) AS total, min(pos) AS first_pos,
       (array_agg(pos ORDER BY pos))[24] AS t_pos
FROM lt_stream GROUP BY k;

-- Feed a lert in five transactions (five consolidation rounds at least).
CREATE FUNCTION pg_temp.feed(t regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 0 .. 4 LOOP
		EXECUTE format('INSERT INTO %s SELECT k FROM lt_stream WHERE pos >= $1 AND pos < $2 ORDER BY pos', t)
		USING (SELECT count(*) FROM lt_stream) * i / 5,
			  (SELECT count(*) FROM lt_stream) * (i + 1) / 5;
	END LOOP;
END;
$$;

CREATE FUNCTION pg_temp.star(t regclass) RETURNS TABLE (key int8)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE format('SELECT key FROM %s', t);
END;
$$;

-- Every property of the reports against the truth; every column must be 0
-- or true.  before_flush: keys the variant must already have reported.
CREATE FUNCTION pg_temp.check_reports(t regclass, flushed bool,
	OUT reports bigint, OUT false_positives bigint, OUT missed bigint,
	OUT duplicates bigint, OUT wrong_count bigint, OUT wrong_first bigint,
	OUT before_t bigint, OUT over_count_bound bigint,
	OUT over_time_bound bigint, OUT out_of_order bigint,
	OUT select_star_differs bigint)
LANGUAGE sql AS $$
WITH r AS (SELECT report_id, key::int8 AS k, count, first_position,
                  reported_position, cone FROM lert_reports(t)),
     i AS (SELECT * FROM lert_info(t)),
     must AS (
       SELECT k FROM lt_truth, i
       WHERE flushed AND total >= 24
          OR i.variant = 'immediate' AND total >= 24
          OR i.variant = 'count_stretch' AND total >= i.count_stretch_bound)
SELECT (SELECT count(*) FROM r),
       (SELECT count(*) FROM r LEFT JOIN lt_truth USING (k)
        WHERE lt_truth.total IS NULL OR lt_truth.total < 24),
       (SELECT count(*) FROM must WHERE k NOT IN (SELECT k FROM r)),
       (SELECT count(*) - count(DISTINCT k) FROM r),
       -- the count at the report is the key's count at the reported position
       (SELECT count(*) FROM r
        WHERE r.count <> (SELECT count(*) FROM lt_stream s
                          WHERE s.k = r.k AND s.pos <= r.reported_position)),
       (SELECT count(*) FROM r JOIN lt_truth USING (k)
        WHERE r.first_position <> lt_truth.first_pos),
       (SELECT count(*) FROM r JOIN lt_truth USING (k)
        WHERE r.reported_position < lt_truth.t_pos
           OR (i.variant = 'immediate' AND r.reported_position <> lt_truth.t_pos)),
       (SELECT count(*) FROM r WHERE i.count_stretch_bound IS NOT NULL
        AND r.count > i.count_stretch_bound),
       (SELECT count(*) FROM r JOIN lt_truth USING (k)
        WHERE i.time_stretch_bound IS NOT NULL
          AND (r.reported_position - lt_truth.first_pos)::float8 /
              (lt_truth.t_pos - lt_truth.first_pos) > i.time_stretch_bound),
       -- each cone's reports come in stream order (cones' rounds interleave)
       (SELECT count(*) FROM (SELECT reported_position < lag(reported_position)
                                OVER (PARTITION BY cone ORDER BY report_id) AS descends
                              FROM r) d WHERE descends),
       (SELECT count(*) FROM ((SELECT k FROM r EXCEPT ALL SELECT key FROM pg_temp.star(t))
                              UNION ALL
                              (SELECT key FROM pg_temp.star(t) EXCEPT ALL SELECT k FROM r)) d)
FROM i
$$;

-- exact counts of every key (must be 0)
CREATE FUNCTION pg_temp.wrong_counts(t regclass) RETURNS bigint
LANGUAGE sql AS $$
SELECT count(*) FROM lt_truth WHERE lert_count(t, k) <> total
$$;

SELECT lert_create('lt_cs', 'int8', buffer_size => '64kB');
SELECT lert_create('lt_cs4', 'int8', buffer_size => '64kB', cones => 4);
SELECT lert_create('lt_ir', 'int8', variant => 'immediate', buffer_size => '64kB');
SELECT lert_create('lt_ts1', 'int8', variant => 'time_stretch', age_bits => 1,
                   buffer_size => '64kB');
SELECT lert_create('lt_ts3', 'int8', variant => 'time_stretch', age_bits => 3,
                   buffer_size => '64kB');
SELECT lert_create('lt_ts2c4', 'int8', variant => 'time_stretch', age_bits => 2,
                   buffer_size => '64kB', cones => 4);
SELECT lert_create('lt_cf', 'int8', variant => 'cascade', buffer_size => '64kB');
-- autovacuum would consolidate them at a time of its own, which what is
-- left in their logs below must not depend on
ALTER TABLE lt_cs SET (autovacuum_enabled = off);
ALTER TABLE lt_cs4 SET (autovacuum_enabled = off);
ALTER TABLE lt_ir SET (autovacuum_enabled = off);
ALTER TABLE lt_ts1 SET (autovacuum_enabled = off);
ALTER TABLE lt_ts3 SET (autovacuum_enabled = off);
ALTER TABLE lt_ts2c4 SET (autovacuum_enabled = off);
ALTER TABLE lt_cf SET (autovacuum_enabled = off);
SELECT variant, threshold, age_bits, growth, levels, level_thresholds, cones,
       level0_capacity, count_stretch_bound, time_stretch_bound
FROM unnest(ARRAY['lt_cs', 'lt_cs4', 'lt_ir', 'lt_ts1', 'lt_ts3', 'lt_ts2c4', 'lt_cf']::regclass[]) t,
     lert_info(t);

SELECT count(pg_temp.feed(t)) AS fed
FROM unnest(ARRAY['lt_cs', 'lt_cs4', 'lt_ir', 'lt_ts1', 'lt_ts3', 'lt_ts2c4', 'lt_cf']::regclass[]) t;

-- lert_info counts the observations still in the change log without
-- consolidating them
SELECT t AS lert, observations, log_observations = pending_records AS one_record_each
FROM unnest(ARRAY['lt_cs', 'lt_ts2c4']::regclass[]) t, lert_info(t);
VACUUM lt_cs, lt_cs4, lt_ir, lt_ts1, lt_ts3, lt_ts2c4, lt_cf;
-- every level took part: flushes and entries on disk; count stretch and
-- immediate keep the counts above the on-disk thresholds in the runs
-- (level_kept), so level 0 never outgrows its capacity
SELECT t AS lert, flushes > 5 AS flushed, observations, log_observations,
       level_entries[1] > 0 AS level1,
       (SELECT sum(k) FROM unnest(level_kept) k) > 0 AS kept_in_runs,
       max_level0_entries <= level0_capacity AS level0_within_capacity
FROM unnest(ARRAY['lt_cs', 'lt_cs4', 'lt_ir', 'lt_ts1', 'lt_ts3', 'lt_ts2c4', 'lt_cf']::regclass[]) t,
     lert_info(t);
-- where the pages are: level 0's (at least one per cone) and each level's
-- (level 1 holds entries, so pages), all within the relation beside the
-- free ones
SELECT t AS lert, level0_pages >= cones AS level0_paged, level_pages[1] > 0 AS level1_paged,
       level0_pages + (SELECT sum(n) FROM unnest(level_pages) n) <= relation_pages - free_pages
         AS within_relation
FROM unnest(ARRAY['lt_cs', 'lt_cs4', 'lt_ir', 'lt_ts1', 'lt_ts3', 'lt_ts2c4', 'lt_cf']::regclass[]) t,
     lert_info(t);

SELECT t AS lert, c.*
FROM unnest(ARRAY['lt_cs', 'lt_cs4', 'lt_ir', 'lt_ts1', 'lt_ts3', 'lt_ts2c4', 'lt_cf']::regclass[]) t,
     pg_temp.check_reports(t, false) c;
SELECT t AS lert, pg_temp.wrong_counts(t) AS wrong_counts
FROM unnest(ARRAY['lt_cs', 'lt_ir', 'lt_cf']::regclass[]) t;

-- lert_flush reports every key that reached T, and nothing else; it
-- returns the reports it made (with those above, 1241: every heavy key;
-- none for immediate, which reported each at its T-th occurrence)
SELECT t AS lert, lert_flush(t) AS reported_by_flush
FROM unnest(ARRAY['lt_cs', 'lt_cs4', 'lt_ir', 'lt_ts1', 'lt_ts3', 'lt_ts2c4', 'lt_cf']::regclass[]) t;
SELECT t AS lert, c.*
FROM unnest(ARRAY['lt_cs', 'lt_cs4', 'lt_ir', 'lt_ts1', 'lt_ts3', 'lt_ts2c4', 'lt_cf']::regclass[]) t,
     pg_temp.check_reports(t, true) c;
SELECT (SELECT count(*) FROM lt_truth WHERE total >= 24) AS heavy_keys;
SELECT t AS lert, pg_temp.wrong_counts(t) AS wrong_counts
FROM unnest(ARRAY['lt_cs4', 'lt_ts1']::regclass[]) t;

-- lert_reports(after) continues where a consumer stopped
SELECT count(*) AS after_100, min(report_id) AS first_id
FROM lert_reports('lt_cs', 100);
SELECT count(*) AS after_all FROM lert_reports('lt_cs', 1000000);
-- every report names its key's cone (its own stream order, above)
SELECT t AS lert, array_agg(DISTINCT cone ORDER BY cone) AS cones_reporting
FROM unnest(ARRAY['lt_cs', 'lt_cs4']::regclass[]) t, lert_reports(t)
GROUP BY t ORDER BY t;

-- ---- transactions: nothing uncommitted counts or reports ----
SELECT lert_create('lt_tx', 'int8', threshold => 4, buffer_size => '64kB');
BEGIN;
INSERT INTO lt_tx VALUES (1), (1), (1), (1), (2);
-- the transaction sees its own observations
SELECT lert_count('lt_tx', 1) AS own_1, lert_reported('lt_tx', 1) AS reported;
ROLLBACK;
SELECT lert_count('lt_tx', 1) AS after_rollback, count(*) AS reports FROM lt_tx;
BEGIN;
INSERT INTO lt_tx VALUES (5);
SAVEPOINT s;
INSERT INTO lt_tx VALUES (5), (5), (5), (5);
ROLLBACK TO SAVEPOINT s;
INSERT INTO lt_tx VALUES (6);
COMMIT;
SELECT lert_count('lt_tx', 5) AS k5, lert_count('lt_tx', 6) AS k6,
       count(*) AS reports FROM lt_tx;
-- a failed statement leaves nothing either
INSERT INTO lt_tx VALUES (7), (7), (NULL), (7), (7), ((SELECT 1 / 0));
SELECT lert_count('lt_tx', 7) AS k7, count(*) AS reports FROM lt_tx;
INSERT INTO lt_tx VALUES (7), (7), (7), (7);
SELECT key, lert_count('lt_tx', key) AS count FROM lt_tx;

-- ---- keys: text (long), composite, a count column ----
CREATE TABLE lt_text (key text) USING lert;
INSERT INTO lt_text SELECT repeat(chr(65 + g % 5), 500 + g % 5) FROM generate_series(1, 120) g;
INSERT INTO lt_text SELECT 'short ' || g % 3 FROM generate_series(1, 75) g;
SELECT left(key, 3) AS key, length(key) AS len, lert_count('lt_text', key) AS count
FROM lt_text ORDER BY key;

-- long keys, toasted in their source table: stored compressed, compared
-- whole (the fourth key differs from the first in its last byte only)
CREATE TABLE lt_long_src (key text);
INSERT INTO lt_long_src
SELECT repeat('heavy hitter ' || g % 3 || ' ', 2000) || g % 3 FROM generate_series(1, 30) g
UNION ALL
SELECT repeat('heavy hitter 0 ', 2000) || '1' FROM generate_series(1, 5);
SELECT count(*) AS rows, count(*) FILTER (WHERE pg_column_size(key) < length(key)) AS compressed
FROM lt_long_src;
SELECT lert_create('lt_long', 'text', threshold => 10, variant => 'immediate');
INSERT INTO lt_long SELECT key FROM lt_long_src;
SELECT length(key) AS len, right(key, 3) AS ending, lert_count('lt_long', key) AS count,
       key IN (SELECT key FROM lt_long_src) AS same_key
FROM lt_long ORDER BY key;
SELECT lert_count('lt_long', repeat('heavy hitter 0 ', 2000) || '1') AS fourth,
       lert_reported('lt_long', repeat('heavy hitter 0 ', 2000) || '1') AS reported,
       lert_count('lt_long', repeat('heavy hitter 0 ', 2000) || '2') AS never_seen;
SELECT lert_flush('lt_long') AS flush_reports;
SELECT length(key) AS len, right(key, 3) AS ending, count, first_position, reported_position
FROM lert_reports('lt_long') ORDER BY report_id;

CREATE TYPE lt_pair AS (a int, b text);
CREATE TABLE lt_comp (key lt_pair) USING lert;
INSERT INTO lt_comp SELECT ROW(g % 2, 'x' || g % 3)::lt_pair FROM generate_series(1, 150) g;
SELECT key, lert_count('lt_comp', key) AS count FROM lt_comp ORDER BY key;

CREATE TABLE lt_weighted (key text, count int) USING lert;
INSERT INTO lt_weighted VALUES ('a', 10), ('b', 23), ('a', 20), ('b', 0), ('c', NULL), ('b', 1);
SELECT * FROM lt_weighted;
SELECT key, count, first_position, reported_position FROM lert_reports('lt_weighted');

-- ---- colliding fingerprints never merge keys ----
SET streamsketch.test_lert_hash_bits = 3;
SELECT lert_create('lt_coll', 'int8', buffer_size => '64kB');
RESET streamsketch.test_lert_hash_bits;
INSERT INTO lt_coll SELECT k FROM lt_stream ORDER BY pos;
SELECT c.* FROM pg_temp.check_reports('lt_coll', false) c;
SELECT pg_temp.wrong_counts('lt_coll') AS wrong_counts;
SELECT lert_flush('lt_coll') >= 0 AS flushed;
SELECT c.* FROM pg_temp.check_reports('lt_coll', true) c;

-- ---- errors ----
CREATE FUNCTION pg_temp.lert_error(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN st || ': ' || msg;
END;
$$;
-- Kept counts: after lert_flush key 1 (20 observations) keeps 6 with its
-- run entries (8 + 4 + 2 on the levels); count stretch takes the 6 back
-- only when the key's own level-0 count passes tau_1 = 8, and then reports
-- it by the observation that brings its level-0 count to T, with no flush
-- in between: 17 more give 37 observations, unreported; the 18th reports
-- it at count 38 = T + sum(tau), at position 37.  Immediate takes the kept
-- count back at the key's first observation and reports at its T-th.
SELECT lert_create('lt_lazy', 'int8', buffer_size => '64kB');
SELECT lert_create('lt_lazy_ir', 'int8', variant => 'immediate', buffer_size => '64kB');
INSERT INTO lt_lazy SELECT 1 FROM generate_series(1, 20);
INSERT INTO lt_lazy_ir SELECT 1 FROM generate_series(1, 20);
SELECT t, lert_flush(t) AS reports
FROM unnest(ARRAY['lt_lazy', 'lt_lazy_ir']::regclass[]) t;
SELECT t, level_kept, level_entries
FROM unnest(ARRAY['lt_lazy', 'lt_lazy_ir']::regclass[]) t, lert_info(t);
INSERT INTO lt_lazy SELECT 1 FROM generate_series(1, 17);
INSERT INTO lt_lazy_ir SELECT 1 FROM generate_series(1, 3);
SELECT t, lert_reported(t, 1::int8), lert_count(t, 1::int8)
FROM unnest(ARRAY['lt_lazy', 'lt_lazy_ir']::regclass[]) t;
INSERT INTO lt_lazy VALUES (1);
INSERT INTO lt_lazy_ir VALUES (1);
SELECT t, r.count, r.first_position, r.reported_position, i.flushes
FROM unnest(ARRAY['lt_lazy', 'lt_lazy_ir']::regclass[]) t, lert_reports(t) r, lert_info(t) i;
DROP TABLE lt_lazy, lt_lazy_ir;

SELECT pg_temp.lert_error($$SELECT lert_create('bad', 'int', variant => 'nope')$$);
SELECT pg_temp.lert_error($$SELECT lert_create('bad', 'int', threshold => 0)$$);
SELECT pg_temp.lert_error($$SELECT lert_create('bad', 'int', threshold => 3)$$);
SELECT pg_temp.lert_error($$SELECT lert_create('bad', 'int', cones => 3)$$);
SELECT pg_temp.lert_error($$SELECT lert_create('bad', 'int', age_bits => 5)$$);
SELECT pg_temp.lert_error($$SELECT lert_create('bad', 'int', growth => 1)$$);
SELECT pg_temp.lert_error($$SELECT lert_create('bad', 'int', buffer_size => '8kB')$$);
SELECT pg_temp.lert_error($$SELECT lert_create(NULL, 'int')$$);
SELECT pg_temp.lert_error($$CREATE TABLE bad (k int, c text) USING lert$$);
SELECT pg_temp.lert_error($$CREATE TABLE bad (k int, c int, d int) USING lert$$);
SELECT pg_temp.lert_error($$INSERT INTO lt_text SELECT string_agg(md5(g::text), '') FROM generate_series(1, 100) g$$);
SELECT pg_temp.lert_error($$INSERT INTO lt_weighted VALUES ('a', -1)$$);
SELECT pg_temp.lert_error($$SELECT lert_count('lt_stream', 1)$$);
SELECT pg_temp.lert_error($$SELECT lert_count('lt_cs', 'x'::text)$$);
SELECT pg_temp.lert_error($$DELETE FROM lt_cs$$);
-- ALTER TABLE checks a new constraint by scanning the reports, resetting
-- its memory after each row: SET NOT NULL passes, a CHECK constraint is
-- refused as on every structure (23514 if a row violates it, else 0A000)
SELECT lert_create('lt_alter', 'int', threshold => 4);
INSERT INTO lt_alter SELECT g % 500 FROM generate_series(1, 2000) g;
SELECT lert_flush('lt_alter') >= 0 AS flushed;
SELECT count(*) AS reports FROM lt_alter;
ALTER TABLE lt_alter ALTER COLUMN key SET NOT NULL;
ALTER TABLE lt_alter ALTER COLUMN key DROP NOT NULL;
ALTER TABLE lt_alter ADD CONSTRAINT lt_ck CHECK (key >= 0);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE lt_alter ADD CONSTRAINT lt_ck CHECK (key < 400);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE lt_alter;
-- the smallest threshold, in the hint: 2, and for count_stretch and
-- immediate more than the level thresholds' sum (each at least 1), so the
-- number of levels plus one when they are derived
SELECT lert_create('bad', 'int', threshold => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT lert_create('lt_min', 'int', threshold => 4);
SELECT threshold, levels, level_thresholds FROM lert_info('lt_min');
SELECT lert_create('bad', 'int', threshold => 1, variant => 'time_stretch');
\echo :LAST_ERROR_SQLSTATE
SET streamsketch.lert_levels = 5;
SELECT lert_create('bad', 'int', threshold => 5, variant => 'immediate');
\echo :LAST_ERROR_SQLSTATE
SET streamsketch.lert_levels = 1;
SELECT lert_create('bad', 'int', threshold => 1);
\echo :LAST_ERROR_SQLSTATE
SET streamsketch.lert_levels = 3;
SET streamsketch.lert_taus = '8,4,2';
SELECT lert_create('bad', 'int', threshold => 14);
\echo :LAST_ERROR_SQLSTATE
SELECT lert_create('lt_min_taus', 'int', threshold => 15);
SELECT threshold, levels, level_thresholds FROM lert_info('lt_min_taus');
SET streamsketch.lert_taus = '8,0,2';
SELECT lert_create('bad', 'int', threshold => 15);
\echo :LAST_ERROR_SQLSTATE
RESET streamsketch.lert_taus;
RESET streamsketch.lert_levels;
SELECT lert_create('bad', 'int', threshold => 3000000000);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE lt_min, lt_min_taus;

-- the notify channel: taken as it is from the setting and lert_create,
-- written as an identifier in the label, which gives it back
SET streamsketch.lert_notify = '"q"';
SELECT lert_create('lt_ch1', 'int');
RESET streamsketch.lert_notify;
SELECT lert_create('lt_ch2', 'int', notify => 'MyChan');
SELECT lert_create('lt_ch3', 'int', notify => 'plain', cones => 2);
SELECT c.relname, l.label FROM pg_seclabels l JOIN pg_class c ON c.oid = l.objoid
 WHERE c.relname IN ('lt_ch1', 'lt_ch2', 'lt_ch3') ORDER BY 1;
SELECT (lert_info('lt_ch1')).notify, (lert_info('lt_ch2')).notify, (lert_info('lt_ch3')).notify;
SECURITY LABEL FOR streamsketch ON TABLE lt_ch3 IS 'variant=immediate threshold=100 age_bits=1 growth=9 levels=2 taus=18,6 buffer_size_kb=4096 cones=2 notify="Ab" hash_bits=64 seed=7';
SELECT variant, threshold, growth, levels, level_thresholds, cones, notify, seed FROM lert_info('lt_ch3');
SELECT pg_temp.lert_error($$SELECT lert_create('bad', 'int', notify => repeat('x', 64))$$);
-- a channel with spaces and quotes reads back from its label
SELECT lert_create('lt_ch4', 'int', notify => 'My "Chan" 2');
SELECT l.label FROM pg_seclabels l WHERE l.objoid = 'lt_ch4'::regclass;
INSERT INTO lt_ch4 VALUES (1);
SELECT notify FROM lert_info('lt_ch4');
SELECT pg_temp.lert_error($$SECURITY LABEL FOR streamsketch ON TABLE lt_ch4 IS 'variant=immediate notify="ab'$$);
DROP TABLE lt_ch1, lt_ch2, lt_ch3, lt_ch4;

-- streamsketch_log_info shows the change log as it is, without
-- consolidating it: the batches of two committed transactions (a rolled
-- back one appends none), then none after a flush
SELECT lert_create('lt_log', 'int8', threshold => 5);
INSERT INTO lt_log SELECT g FROM generate_series(1, 100) g;
INSERT INTO lt_log SELECT g FROM generate_series(1, 50) g;
BEGIN;
INSERT INTO lt_log SELECT g FROM generate_series(1, 10) g;
ROLLBACK;
SELECT log_records, log_bytes, log_pages, free_log_pages, consolidations
FROM streamsketch_log_info('lt_log');
SELECT lert_flush('lt_log');
SELECT log_records, log_bytes, log_pages, free_log_pages, consolidations
FROM streamsketch_log_info('lt_log');
SELECT observations, reports FROM lert_info('lt_log');
SELECT pg_temp.lert_error($$SELECT streamsketch_log_info('lt_truth')$$);

-- ---- space: cones share what their merges free ----
-- The free pages of every cone go back to one pool at its rounds'
-- installs, where neighbours merge whichever cone freed them; so four
-- cones take no more pages than one on the same stream (cones reusing
-- only their own took 12,296 pages against one cone's 9,975 here).
SELECT setseed(0.25);
CREATE TEMP TABLE lt_space_stream AS
SELECT (floor(exp(random() * 14)))::int8 AS k
FROM generate_series(1, 1500000);
SELECT lert_create('lt_space1', 'int8', 24, buffer_size => '256kB', cones => 1);
SELECT lert_create('lt_space4', 'int8', 24, buffer_size => '256kB', cones => 4);
DO $$
BEGIN
	FOR b IN 0..5 LOOP
		INSERT INTO lt_space1 SELECT k FROM lt_space_stream OFFSET b * 250000 LIMIT 250000;
		INSERT INTO lt_space4 SELECT k FROM lt_space_stream OFFSET b * 250000 LIMIT 250000;
	END LOOP;
END $$;
SELECT lert_flush('lt_space1') AS flushed1, lert_flush('lt_space4') AS flushed4;
SELECT pg_relation_size('lt_space4') <= pg_relation_size('lt_space1') AS four_no_larger,
	(SELECT count(*) FROM lt_space1) = (SELECT count(*) FROM lt_space4) AS same_keys;
-- Free extents the metapage has no room for wait on the pool's spill
-- page, where they still merge and are reserved, instead of being
-- forgotten (four sessions on 32 M observations forgot 12,000 pages).
-- With room for two in the metapage (a test setting) the same stream
-- takes about the pages it takes with 128 (8,688 pages against 8,630 when
-- this was written), its free pages the spill page's included, and the
-- same reports.  One cone (whose round's copy then starts with the
-- metapage's two and keeps what it frees beyond them in memory until its
-- install, but does not reserve spilled extents) loses none either:
-- 12,257 pages against 9,958.  (The loop is the one above, run with the
-- setting.)
SET streamsketch.test_lert_free_extents = 2;
SELECT lert_create('lt_space4s', 'int8', 24, buffer_size => '256kB', cones => 4);
SELECT lert_create('lt_space1s', 'int8', 24, buffer_size => '256kB', cones => 1);
DO $$
BEGIN
	FOR b IN 0..5 LOOP
		INSERT INTO lt_space4s SELECT k FROM lt_space_stream OFFSET b * 250000 LIMIT 250000;
		INSERT INTO lt_space1s SELECT k FROM lt_space_stream OFFSET b * 250000 LIMIT 250000;
	END LOOP;
END $$;
SELECT lert_flush('lt_space4s') AS flushed4s, lert_flush('lt_space1s') AS flushed1s;
RESET streamsketch.test_lert_free_extents;
SELECT pg_relation_size('lt_space4s') <= 1.1 * pg_relation_size('lt_space4') AS spill_no_larger,
	pg_relation_size('lt_space1s') <= 1.3 * pg_relation_size('lt_space1') AS one_cone_bounded,
	(SELECT free_pages FROM lert_info('lt_space4s')) >
	(SELECT free_pages FROM lert_info('lt_space4')) / 2 AS spilled_counted_free,
	(SELECT count(*) FROM lt_space4s) = (SELECT count(*) FROM lt_space4) AND
	(SELECT count(*) FROM lt_space1s) = (SELECT count(*) FROM lt_space1) AS same_keys;
DROP TABLE lt_space1, lt_space4, lt_space4s, lt_space1s, lt_space_stream;

DROP TABLE lt_stream, lt_truth, lt_cs, lt_cs4, lt_ir, lt_ts1, lt_ts3, lt_cf,
	lt_tx, lt_text, lt_comp, lt_weighted, lt_coll, lt_log;
DROP TYPE lt_pair;
