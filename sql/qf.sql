-- quotient_filter: approximate membership and counts with deletes
SET client_min_messages = warning;
-- the counters and reports below are read after this session's own
-- consolidation: its commits queue nothing for a background worker,
-- which would hold the consolidation lock meanwhile
SET streamsketch.background_consolidation = off;
LOAD 'streamsketch';
-- writers consolidate a change log longer than 64 kB, so that the
-- statements below reach the buffers and levels as they go
SET streamsketch.change_log_limit = '64kB';
SHOW streamsketch.qf_capacity;
SHOW streamsketch.qf_fp_rate;

SET streamsketch.qf_capacity = 100000;
SET streamsketch.qf_fp_rate = 0.001;
CREATE TABLE seen (id bigint) USING quotient_filter;
RESET streamsketch.qf_capacity;
RESET streamsketch.qf_fp_rate;
SELECT access_method, capacity, fp_rate, fingerprint_bits, remainder_bits,
       slot_bits, levels, pages, items, total_count
FROM qf_info('seen');
SELECT objname, label FROM pg_catalog.pg_seclabels WHERE provider = 'streamsketch' AND objname = 'seen';

-- (after every statement that must fail, \echo :LAST_ERROR_SQLSTATE shows its
-- SQLSTATE)

-- no false negatives; false-positive rate within 1.5x of the theory
INSERT INTO seen SELECT i FROM generate_series(1, 100000) i;
-- qf_info describes the levels as consolidated and does not consolidate:
-- the keys wait in the change log (pending_records) until qf_flush, VACUUM
-- or a background worker consolidates them
SELECT items, total_count, pending_records, pending_bytes > 0 AS log_bytes
FROM qf_info('seen');
SELECT qf_flush('seen') AS items;
SELECT items, total_count, pending_records, pending_bytes,
       round(load_factor::numeric, 2) AS load FROM qf_info('seen');
SELECT count(*) FILTER (WHERE NOT qf_contains('seen', i)) AS false_negatives
FROM generate_series(1, 100000) i;
SELECT avg(qf_contains('seen', i)::int) / (SELECT false_positive_rate FROM qf_info('seen'))
	BETWEEN 0.5 AND 1.5 AS fp_rate_near_theory,
	(SELECT false_positive_rate FROM qf_info('seen')) <= 0.001 AS within_requested
FROM generate_series(1000001, 2000000) i;
SELECT * FROM seen;

-- counts, and deletes that remove exactly one copy
INSERT INTO seen VALUES (7), (7), (7);
SELECT qf_count('seen', 7), qf_contains('seen', 7), qf_count('seen', 10000001);
SELECT qf_delete('seen', 7);
SELECT qf_count('seen', 7) AS after_one_delete;
SELECT qf_delete('seen', 7, 2);
SELECT qf_count('seen', 7) AS after_two_more, qf_contains('seen', 7) AS still_there;
SELECT qf_delete('seen', 7);
SELECT qf_count('seen', 7) AS after_last, qf_contains('seen', 7) AS gone;
SELECT qf_delete('seen', 8, -1);
\echo :LAST_ERROR_SQLSTATE
-- deleting other keys leaves every inserted key present
SELECT qf_delete('seen', i) FROM generate_series(50001, 60000) i \g /dev/null
SELECT count(*) FILTER (WHERE NOT qf_contains('seen', i)) AS false_negatives
FROM generate_series(1, 100000) i WHERE i NOT BETWEEN 50001 AND 60000 AND i <> 7;

-- transactions: own changes visible, rollback leaves no trace
BEGIN;
INSERT INTO seen VALUES (-1), (-1);
SELECT qf_delete('seen', 1::bigint);
SELECT qf_count('seen', -1) AS inside, qf_count('seen', 1) AS deleted_inside;
ROLLBACK;
SELECT qf_count('seen', -1) AS after_rollback, qf_count('seen', 1) AS restored;
BEGIN;
INSERT INTO seen VALUES (-2);
SAVEPOINT s;
INSERT INTO seen VALUES (-2), (-2);
ROLLBACK TO s;
COMMIT;
SELECT qf_count('seen', -2) AS one;

-- counting filter: exact counts on a collision-free workload
SELECT qf_create('counts', 'int', capacity => 20000, fp_rate => 1e-9, counted => true);
\d counts
INSERT INTO counts SELECT i, i % 100 + 1 FROM generate_series(1, 10000) i;
INSERT INTO counts SELECT i, 1000000000000 FROM generate_series(1, 3) i;
SELECT count(*) FILTER (WHERE qf_count('counts', i) <> i % 100 + 1 + CASE WHEN i <= 3 THEN 1000000000000 ELSE 0 END) AS wrong_counts
FROM generate_series(1, 10000) i;
SELECT qf_flush('counts') AS items;
SELECT items, total_count FROM qf_info('counts');
INSERT INTO counts VALUES (1, -5);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO counts VALUES (NULL, 1), (1, NULL), (1, 0);
SELECT qf_count('counts', 1);

-- growth: five times the capacity, still no false negatives
SELECT qf_create('grow', 'text', capacity => 10000, fp_rate => 0.01);
INSERT INTO grow SELECT 'k' || i FROM generate_series(1, 50000) i;
VACUUM grow;
SELECT pages, resizes > 0 AS resized, items FROM qf_info('grow');
SELECT count(*) FILTER (WHERE NOT qf_contains('grow', 'k' || i)) AS false_negatives
FROM generate_series(1, 50000) i;
SELECT qf_resize('grow');
SELECT pages, remainder_bits FROM qf_info('grow');
SELECT count(*) FILTER (WHERE NOT qf_contains('grow', 'k' || i)) AS false_negatives
FROM generate_series(1, 50000) i;

-- merge of one filter table into another
SELECT qf_create('other', 'text', capacity => 10000, fp_rate => 0.01);
INSERT INTO other SELECT 'o' || i FROM generate_series(1, 5000) i;
INSERT INTO other VALUES ('k1');
SELECT qf_merge('other', 'grow');
SELECT count(*) FILTER (WHERE NOT qf_contains('other', 'k' || i)) AS false_negatives_merged,
	   (SELECT count(*) FILTER (WHERE NOT qf_contains('other', 'o' || i)) FROM generate_series(1, 5000) i) AS false_negatives_own
FROM generate_series(1, 50000) i;
SELECT qf_count('other', 'k1'::text) AS k1_twice;
SELECT qf_merge('other', 'other');
\echo :LAST_ERROR_SQLSTATE
SELECT qf_merge('other', 'seen');
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create('other2', 'int', capacity => 10000, fp_rate => 0.01);
SELECT qf_merge('other2', 'other');
\echo :LAST_ERROR_SQLSTATE

-- crash-free TRUNCATE
BEGIN;
TRUNCATE grow;
SELECT qf_contains('grow', 'k1'::text) AS truncated;
ROLLBACK;
SELECT qf_contains('grow', 'k1'::text) AS kept;
TRUNCATE grow;
SELECT qf_contains('grow', 'k1'::text) AS truncated, pages FROM qf_info('grow');

-- errors
SELECT qf_create('bad', 'int', capacity => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create('bad', 'int', fp_rate => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create('bad', 'int', fp_rate => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create('bad', 'int', fp_rate => 1e-19);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create('bad', 'int', capacity => 9000000000000000000);
\echo :LAST_ERROR_SQLSTATE
-- a fingerprint space past 2^64 (y = floor(h * M / 2^64) would wrap)
SELECT qf_create('bad', 'int', capacity => 20000, fp_rate => 1e-15);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create('bad', 'int', capacity => 20000, fp_rate => 1e-15,
				 access_method => 'cascade_filter');
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create(NULL, 'int');
\echo :LAST_ERROR_SQLSTATE
SELECT qf_contains('seen', 'x'::text);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE heap_q (k int);
SELECT qf_contains('heap_q', 1);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE bad3 (a int, b text) USING quotient_filter;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY sqlstate
UPDATE seen SET id = 1;
DELETE FROM seen;
CREATE INDEX ON seen (id);
ALTER TABLE seen ADD COLUMN x int;
\set VERBOSITY default
VACUUM FULL seen;
SELECT qf_contains('seen', 99), qf_count('seen', 99);
DROP TABLE seen;
SELECT count(*) FROM pg_catalog.pg_seclabels WHERE objname = 'seen';

-- a filter grows until its fingerprints have no remainder bit left to
-- trade; then the commit fails
SELECT qf_create('tiny', 'int', capacity => 10, fp_rate => 0.5);
SELECT fingerprint_bits, remainder_bits FROM qf_info('tiny');
INSERT INTO tiny SELECT generate_series(1, 1000);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE tiny;

-- buffered quotient filter and cascade filters: a 32 kB level 0 that fills
-- and merges many times (out of place) while 50 transactions commit
SELECT qf_create('bqf', 'int8', capacity => 100000, fp_rate => 0.001,
				 access_method => 'buffered_quotient_filter', buffer_size => '32kB');
SELECT qf_create('cf2', 'int8', capacity => 100000, fp_rate => 0.001,
				 access_method => 'cascade_filter', fanout => 2, buffer_size => '32kB');
SELECT qf_create('cf4', 'int8', capacity => 100000, fp_rate => 0.001,
				 access_method => 'cascade_filter', fanout => 4, buffer_size => '32kB');
SELECT qf_create('cf16', 'int8', capacity => 100000, fp_rate => 0.001,
				 access_method => 'cascade_filter', fanout => 16, buffer_size => '32kB');
SELECT access_method, fingerprint_bits, levels, pages FROM qf_info('bqf');
SELECT objname, label FROM pg_catalog.pg_seclabels WHERE provider = 'streamsketch' AND (objname LIKE 'cf%' OR objname = 'bqf') ORDER BY objname;
DO $$
BEGIN
	FOR j IN 0..49 LOOP
		INSERT INTO bqf SELECT i FROM generate_series(j * 2000 + 1, (j + 1) * 2000) i;
		INSERT INTO cf2 SELECT i FROM generate_series(j * 2000 + 1, (j + 1) * 2000) i;
		INSERT INTO cf4 SELECT i FROM generate_series(j * 2000 + 1, (j + 1) * 2000) i;
		INSERT INTO cf16 SELECT i FROM generate_series(j * 2000 + 1, (j + 1) * 2000) i;
		COMMIT;
	END LOOP;
END;
$$;
VACUUM bqf, cf2, cf4, cf16;
SELECT access_method, levels, items, total_count, resizes > 5 AS merged_often
FROM qf_info('bqf') UNION ALL SELECT access_method || ' 2', levels, items, total_count, resizes > 5 FROM qf_info('cf2')
UNION ALL SELECT access_method || ' 4', levels, items, total_count, resizes > 5 FROM qf_info('cf4')
UNION ALL SELECT access_method || ' 16', levels, items, total_count, resizes > 5 FROM qf_info('cf16');
SELECT count(*) FILTER (WHERE NOT qf_contains('bqf', i)) AS fn_bqf,
	   count(*) FILTER (WHERE NOT qf_contains('cf2', i)) AS fn_cf2,
	   count(*) FILTER (WHERE NOT qf_contains('cf4', i)) AS fn_cf4,
	   count(*) FILTER (WHERE NOT qf_contains('cf16', i)) AS fn_cf16
FROM generate_series(1, 100000) i;
-- every level uses the same fingerprints: the false-positive rate is that
-- of one QF holding everything
SELECT avg(qf_contains('cf4', i)::int) / (SELECT false_positive_rate FROM qf_info('cf4'))
	BETWEEN 0.5 AND 1.5 AS cf_fp_rate_near_theory,
	avg(qf_contains('bqf', i)::int) / (SELECT false_positive_rate FROM qf_info('bqf'))
	BETWEEN 0.5 AND 1.5 AS bqf_fp_rate_near_theory
FROM generate_series(1000001, 1500000) i;
-- one transaction four times larger than level 0 makes room once per
-- level-0 fill (about 4 merges), not once per overflowing level-0 page
SELECT qf_create('cf_bulk', 'int8', capacity => 100000, fp_rate => 0.001,
				 access_method => 'cascade_filter', buffer_size => '64kB');
INSERT INTO cf_bulk SELECT i FROM generate_series(1, 100000) i;
VACUUM cf_bulk;
SELECT resizes BETWEEN 3 AND 8 AS merges_per_fill, total_count FROM qf_info('cf_bulk');
SELECT count(*) FILTER (WHERE NOT qf_contains('cf_bulk', i)) AS fn_bulk
FROM generate_series(1, 100000) i;
DROP TABLE cf_bulk;
-- VACUUM FULL keeps the live levels only (growth leaves runs behind, merges
-- keep spare runs), with the same contents; a cascade filter's levels are
-- merged into its largest (a fingerprint in two levels becomes one item),
-- which is then all the file holds besides the metapage: the pages of a
-- quotient_filter of its capacity
SELECT qf_create('vf_q', 'int8', capacity => 1000, fp_rate => 0.001);
SELECT qf_create('vf_ref', 'int8', capacity => 100000, fp_rate => 0.001);
INSERT INTO vf_q SELECT generate_series(1, 20000);
SELECT qf_create('vf_c', 'int8', capacity => 100000, fp_rate => 0.001,
				 access_method => 'cascade_filter', buffer_size => '64kB');
DO $$
BEGIN
	FOR j IN 0..19 LOOP
		INSERT INTO vf_c SELECT i FROM generate_series(j * 2000 + 1, (j + 1) * 2000) i;
		COMMIT;
	END LOOP;
END;
$$;
SELECT qf_delete('vf_c', 5::int8);
VACUUM vf_q, vf_c;
CREATE TEMP TABLE vf_before AS
SELECT t, relation_pages, items, total_count, levels FROM (VALUES ('vf_q'), ('vf_c')) v(t), qf_info(t::regclass);
CREATE TEMP TABLE vf_counts AS
SELECT i, qf_count('vf_q', i) AS q, qf_count('vf_c', i) AS c FROM generate_series(1, 20000) i;
VACUUM FULL vf_q;
VACUUM FULL vf_c;
SELECT b.t, b.relation_pages AS pages_before, a.relation_pages AS pages_after,
	   a.relation_pages = CASE b.t WHEN 'vf_q' THEN a.pages
			ELSE (SELECT pages FROM qf_info('vf_ref')) END + 1 AS live_levels_only,
	   (a.total_count, a.levels) = (b.total_count, b.levels) AND
	   a.items <= b.items AS same_totals
FROM vf_before b, qf_info(b.t::regclass) a ORDER BY 1;
SELECT count(*) FILTER (WHERE qf_count('vf_q', i) <> q) AS changed_q,
	   count(*) FILTER (WHERE qf_count('vf_c', i) <> c) AS changed_c,
	   count(*) FILTER (WHERE q = 0) AS fn_q, qf_count('vf_c', 5) AS deleted
FROM vf_counts;
-- and keeps working: more inserts and merges
INSERT INTO vf_c SELECT generate_series(40001, 80000);
SELECT count(*) FILTER (WHERE NOT qf_contains('vf_c', i)) AS fn_c
FROM generate_series(6, 80000) i;
DROP TABLE vf_q, vf_c, vf_ref, vf_before, vf_counts;
-- counts add up over levels; deletes reach older levels
INSERT INTO cf4 VALUES (10), (10);
SELECT qf_count('cf4', 10) AS three;
SELECT qf_delete('cf4', 10, 3);
SELECT qf_count('cf4', 10) AS zero, qf_count('cf4', 11) AS one;
BEGIN;
SELECT qf_delete('cf4', 11);
INSERT INTO cf4 VALUES (-5);
SELECT qf_count('cf4', 11) AS deleted_inside, qf_count('cf4', -5) AS inserted_inside;
ROLLBACK;
SELECT qf_count('cf4', 11) AS restored, qf_count('cf4', -5) AS absent;
-- resize merges every level into one larger one
SELECT qf_resize('cf4') > 0 AS resized;
SELECT count(*) FILTER (WHERE NOT qf_contains('cf4', i)) AS fn_after_resize
FROM generate_series(1, 100000) i WHERE i <> 10;
-- merge between kinds with the same fingerprints
SELECT qf_create('cf_target', 'int8', capacity => 100000, fp_rate => 0.001,
				 access_method => 'cascade_filter', buffer_size => '64kB');
SELECT qf_merge('cf_target', 'bqf');
SELECT count(*) FILTER (WHERE NOT qf_contains('cf_target', i)) AS fn_merged
FROM generate_series(1, 100000) i;
SELECT qf_create('bad', 'int', access_method => 'cascade_filter', fanout => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create('bad', 'int', access_method => 'bloomier');
\echo :LAST_ERROR_SQLSTATE
SELECT qf_create('bad', 'int', access_method => 'cascade_filter', buffer_size => '1kB');
\echo :LAST_ERROR_SQLSTATE

-- an in-memory qfilter merges into a table with the same fingerprints
SELECT qf_create('from_value', 'int8', capacity => 100000, fp_rate => 0.001);
INSERT INTO from_value VALUES (1);
SELECT qf_merge_value('from_value', qfilter_agg(i::int8, 100000, 0.001))
FROM generate_series(1, 20000) i;
SELECT count(*) FILTER (WHERE NOT qf_contains('from_value', i)) AS false_negatives,
	   (SELECT qf_count('from_value', 1)) AS one_twice
FROM generate_series(1, 20000) i;
SELECT qf_merge_value('from_value', qfilter_agg(i::int8, 1000, 0.001)) FROM generate_series(1, 10) i;
\echo :LAST_ERROR_SQLSTATE
SELECT qf_merge_value('from_value', qfilter_agg(i, 100000, 0.001)) FROM generate_series(1, 10) i;
\echo :LAST_ERROR_SQLSTATE
SELECT qf_merge_value('from_value', qfilter_agg(i::text, 100000, 0.001)) FROM generate_series(1, 10) i;
\echo :LAST_ERROR_SQLSTATE

-- a qfilter of the table's capacity and rate has the table's fingerprint
-- space (sized, not a power of two): merged, every key, present or not,
-- has the count of the same keys inserted directly
SELECT qf_create('qf_direct', 'int8', capacity => 5000, fp_rate => 1.0/64);
SELECT qf_create('qf_merged', 'int8', capacity => 5000, fp_rate => 1.0/64);
INSERT INTO qf_direct SELECT (i % 3000)::int8 FROM generate_series(1, 6000) i;
SELECT qf_merge_value('qf_merged', qfilter_agg((i % 3000)::int8, 5000, 1.0/64))
FROM generate_series(1, 6000) i;
SELECT (qf_info('qf_merged')).fingerprint_bits,
	   (qfilter_info(qfilter_agg(1::int8, 5000, 1.0/64))).fingerprint_bits AS qfilter_bits,
	   split_part(split_part(qfilter_agg(1::int8, 5000, 1.0/64)::text, ' space=', 2), ' ', 1) AS qfilter_space;
SELECT count(*) FILTER (WHERE qf_count('qf_direct', k) <> qf_count('qf_merged', k)) AS differ,
	   sum(qf_count('qf_merged', k)) FILTER (WHERE k < 3000) AS present_total,
	   count(*) FILTER (WHERE k >= 3000 AND qf_count('qf_merged', k) > 0) > 0 AS some_fp
FROM generate_series(0, 40000) k;
DROP TABLE qf_direct, qf_merged;
-- a sized qfilter (space 20991*2^6 here) into buffered and cascade filters
-- whose level 0 is below the capacity's level (their home slots per page
-- rounded for the nested levels, so another space of 21 bits): each of its
-- fingerprints adds every table fingerprint its hashes meet, with its
-- count, so no key is missed and no count is below the same keys inserted
-- directly; the extra false positives are about the qfilter's own (n / M
-- of its space), bound here at 1.5x them
CREATE TEMP TABLE qv AS
SELECT qfilter_agg((i % 10000)::int8, 20000, 1.0/64) AS v
FROM generate_series(1, 20000) i;
SELECT qf_create('mv_' || k || d, 'int8', capacity => 20000, fp_rate => 1.0/64,
				 access_method => am, buffer_size => '16kB')
FROM (VALUES ('bqf', 'buffered_quotient_filter'), ('cf', 'cascade_filter')) a(k, am),
	 (VALUES ('_direct'), ('_merged')) b(d);
INSERT INTO mv_bqf_direct SELECT (i % 10000)::int8 FROM generate_series(1, 20000) i;
INSERT INTO mv_cf_direct SELECT (i % 10000)::int8 FROM generate_series(1, 20000) i;
SELECT qf_merge_value('mv_bqf_merged', v) AS bqf, qf_merge_value('mv_cf_merged', v) AS cf,
	   (qf_info('mv_cf_merged')).fingerprint_bits AS table_bits,
	   split_part(split_part(v::text, ' space=', 2), ' ', 1) AS qfilter_space
FROM qv;
SELECT m, count(*) FILTER (WHERE k < 10000 AND NOT qf_contains(m, k)) AS false_negatives,
	   count(*) FILTER (WHERE k < 10000 AND qf_count(m, k) < 2) AS undercounted,
	   count(*) FILTER (WHERE qf_count(m, k) < qf_count(d, k)) AS below_direct,
	   count(*) FILTER (WHERE k >= 10000 AND qf_contains(m, k)) -
	   count(*) FILTER (WHERE k >= 10000 AND qf_contains(d, k))
	   BETWEEN 1 AND 1.5 * count(*) FILTER (WHERE k >= 10000 AND qfilter_contains(v, k)) AS extra_fp_bound
FROM (VALUES ('mv_bqf_merged'::regclass, 'mv_bqf_direct'::regclass),
			 ('mv_cf_merged'::regclass, 'mv_cf_direct'::regclass)) a(m, d),
	 qv, generate_series(0, 49999) k
GROUP BY m ORDER BY m::text;
-- a buffer that holds the capacity's level makes it level 0, in the
-- qfilter's space: the merge is exact
SELECT qf_create('mv_exact', 'int8', capacity => 20000, fp_rate => 1.0/64,
				 access_method => 'buffered_quotient_filter', buffer_size => '32kB');
SELECT qf_merge_value('mv_exact', v) AS merged FROM qv;
SELECT count(*) FILTER (WHERE qf_count('mv_exact', k) <> qfilter_count(v, k)) AS differ
FROM qv, generate_series(0, 49999) k;
DROP TABLE qv, mv_bqf_direct, mv_bqf_merged, mv_cf_direct, mv_cf_merged, mv_exact;

-- per-level and total counters saturate like the sketch counters
SELECT qf_create('qf_sat', 'int', capacity => 1000, counted => true);
INSERT INTO qf_sat VALUES (1, 9223372036854775807);
INSERT INTO qf_sat VALUES (2, 9223372036854775807);
INSERT INTO qf_sat VALUES (3, 9223372036854775807);
VACUUM qf_sat;
SELECT items, total_count FROM qf_info('qf_sat');
SELECT qf_count('qf_sat', 1), qf_count('qf_sat', 2), qf_count('qf_sat', 4);
-- prepared transactions (two-phase commit) are tested in twophase.sql
DROP TABLE qf_sat;

-- sized to the capacity: filled to it, a quotient_filter has not grown,
-- is 85% to 95% full (its pages round up; 97% for the short remainders of
-- 1/64, sized to that load), within its fp_rate, and takes
-- at most 1.15 times the pages of a plain bloom_filter of the same
-- capacity and fp_rate
SELECT qf_create('qsz_' || f, 'int8', capacity => 100000, fp_rate => 1.0 / f),
	   bloom_create('bsz_' || f, 'int8', capacity => 100000, fp_rate => 1.0 / f,
					mode => 'plain')
FROM (VALUES (64), (512), (4096)) v(f);
INSERT INTO qsz_64 SELECT hashint8extended(g, 0) FROM generate_series(1, 100000) g;
INSERT INTO qsz_512 SELECT hashint8extended(g, 0) FROM generate_series(1, 100000) g;
INSERT INTO qsz_4096 SELECT hashint8extended(g, 0) FROM generate_series(1, 100000) g;
SELECT qf_flush('qsz_64') > 0, qf_flush('qsz_512') > 0, qf_flush('qsz_4096') > 0;
SELECT f, q.resizes AS grown,
	   q.load_factor BETWEEN 0.85 AND CASE f WHEN 64 THEN 0.97 ELSE 0.95 END AS near_full,
	   q.false_positive_rate <= 1.0 / f AS within_fp,
	   q.pages <= 1.15 * b.pages AS within_bloom
FROM (VALUES (64), (512), (4096)) v(f),
	 qf_info(('qsz_' || f)::regclass) q, bloom_info(('bsz_' || f)::regclass) b;
-- buffered and cascade filters of that capacity, filled with the same keys
-- in transactions of 10,000 (many merges), at the end of the stream
-- (qf_flush, then VACUUM FULL, which merges their levels into the largest
-- and keeps that level only): the largest level is the capacity's (the
-- remainder bits of the quotient_filter: not grown), the model rate is
-- within fp_rate, and the file is at most 1.15 times the plain
-- bloom_filter's pages
SELECT qf_create(k || 'sz_' || f, 'int8', capacity => 100000, fp_rate => 1.0 / f,
				 access_method => am, buffer_size => '64kB')
FROM (VALUES (64), (512), (4096)) v(f),
	 (VALUES ('bq', 'buffered_quotient_filter'), ('cf', 'cascade_filter')) a(k, am)
ORDER BY k, f;
DO $$
BEGIN
	FOR j IN 0..9 LOOP
		INSERT INTO bqsz_64 SELECT hashint8extended(g, 0) FROM generate_series(j * 10000 + 1, (j + 1) * 10000) g;
		INSERT INTO bqsz_512 SELECT hashint8extended(g, 0) FROM generate_series(j * 10000 + 1, (j + 1) * 10000) g;
		INSERT INTO bqsz_4096 SELECT hashint8extended(g, 0) FROM generate_series(j * 10000 + 1, (j + 1) * 10000) g;
		INSERT INTO cfsz_64 SELECT hashint8extended(g, 0) FROM generate_series(j * 10000 + 1, (j + 1) * 10000) g;
		INSERT INTO cfsz_512 SELECT hashint8extended(g, 0) FROM generate_series(j * 10000 + 1, (j + 1) * 10000) g;
		INSERT INTO cfsz_4096 SELECT hashint8extended(g, 0) FROM generate_series(j * 10000 + 1, (j + 1) * 10000) g;
		COMMIT;
	END LOOP;
END;
$$;
SELECT qf_flush(k || 'sz_' || f) > 99000 AS flushed
FROM (VALUES (64), (512), (4096)) v(f), (VALUES ('bq'), ('cf')) a(k)
GROUP BY 1;
VACUUM FULL bqsz_64, bqsz_512, bqsz_4096, cfsz_64, cfsz_512, cfsz_4096;
SELECT k, f, c.resizes > 0 AS merged,
	   c.remainder_bits = q.remainder_bits AS not_grown,
	   c.false_positive_rate <= 1.0 / f AS within_fp,
	   c.relation_pages <= 1.15 * b.pages AS within_bloom,
	   c.total_count
FROM (VALUES (64), (512), (4096)) v(f), (VALUES ('bq'), ('cf')) a(k),
	 qf_info((k || 'sz_' || f)::regclass) c, qf_info(('qsz_' || f)::regclass) q,
	 bloom_info(('bsz_' || f)::regclass) b
ORDER BY k, f;
SELECT count(*) FILTER (WHERE NOT qf_contains('bqsz_4096', hashint8extended(g, 0)) OR
						NOT qf_contains('cfsz_64', hashint8extended(g, 0))) AS false_negatives
FROM generate_series(1, 100000) g;
DROP TABLE qsz_64, qsz_512, qsz_4096, bsz_64, bsz_512, bsz_4096,
	bqsz_64, bqsz_512, bqsz_4096, cfsz_64, cfsz_512, cfsz_4096;
