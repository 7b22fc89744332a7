-- bloom_filter: the paged Bloom filter (plain), the elevator Bloom filter
-- (EBF) and the buffered Bloom filter with hash localization (BBF)
\set VERBOSITY default
SET client_min_messages = warning;
-- the counters and reports below are read after this session's own
-- consolidation: its commits queue nothing for a background worker,
-- which would hold the consolidation lock meanwhile
SET streamsketch.background_consolidation = off;
LOAD 'streamsketch';
-- writers consolidate a change log longer than 64 kB, so that the
-- statements below reach the buffers and levels as they go
SET streamsketch.change_log_limit = '64kB';

-- Run a statement that must fail and show its SQLSTATE, message, detail
-- and hint (but no source locations, which change with every edit).
CREATE FUNCTION bloom_test_error(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg
		|| coalesce(E'\nDETAIL: ' || nullif(det, ''), '')
		|| coalesce(E'\nHINT: ' || nullif(hnt, ''), '');
END
$$;

-- GUC defaults are captured at CREATE TABLE
SHOW streamsketch.bloom_capacity;
SHOW streamsketch.bloom_fp_rate;
SHOW streamsketch.bloom_mode;
SHOW streamsketch.bloom_buffer_size;
SET streamsketch.bloom_capacity = 100000;
CREATE TABLE seen (id bigint) USING bloom_filter;
RESET streamsketch.bloom_capacity;
-- m = ceil(-n ln p / (ln 2)^2) bits, k = round(m/n ln 2)
SELECT mode, capacity, fp_rate, bits, hashes, pages, buffer_pages,
       subbuffer_capacity, buffered_entries, items, bits_set, fill_ratio,
       false_positive_rate, flushes, relation_pages
FROM bloom_info('seen');
SELECT ceil(-100000 * ln(0.001) / ln(2) ^ 2) AS m,
       round(ceil(-100000 * ln(0.001) / ln(2) ^ 2) / 100000 * ln(2)) AS k;
SELECT objname, label FROM pg_catalog.pg_seclabels WHERE provider = 'streamsketch' AND objname = 'seen';

-- a filter has no rows to enumerate
INSERT INTO seen SELECT i FROM generate_series(1, 100000) i;
SELECT * FROM seen;
SELECT count(*) FROM seen;
-- bloom_info counts the committed keys still in the change log without
-- setting their bits; VACUUM (or a background worker) sets them
SELECT items, pending_records, round(fill_ratio::numeric, 2) AS fill
FROM bloom_info('seen');
VACUUM seen;
SELECT mode, items, pending_records, round(fill_ratio::numeric, 2) AS fill,
       round(false_positive_rate::numeric, 4) AS theory FROM bloom_info('seen');

-- The three modes with small buffers (64 kB), each filled twice with the
-- same 10^5 keys: by one INSERT, and by 200 transactions of 500 keys so
-- that the buffers fill and flush many times.
SELECT bloom_create('bf_plain', 'int8', capacity => 100000, fp_rate => 0.001,
					mode => 'plain');
SELECT bloom_create('bf_elevator', 'int8', capacity => 100000, fp_rate => 0.001,
					mode => 'elevator', buffer_size => '64kB');
SELECT bloom_create('bf_localized', 'int8', capacity => 100000, fp_rate => 0.001,
					mode => 'localized', buffer_size => '64kB');
SELECT bloom_create('tx_plain', 'int8', capacity => 100000, fp_rate => 0.001,
					mode => 'plain');
SELECT bloom_create('tx_elevator', 'int8', capacity => 100000, fp_rate => 0.001,
					mode => 'elevator', buffer_size => '64kB');
SELECT bloom_create('tx_localized', 'int8', capacity => 100000, fp_rate => 0.001,
					mode => 'localized', buffer_size => '64kB');
SELECT objname, label FROM pg_catalog.pg_seclabels WHERE provider = 'streamsketch'
AND (objname LIKE 'bf%' OR objname LIKE 'tx%') ORDER BY objname;
SELECT i.* FROM unnest(ARRAY['bf_plain', 'bf_elevator', 'bf_localized']) t,
	LATERAL (SELECT mode, bits, hashes, pages, buffer_pages, subbuffer_capacity
			 FROM bloom_info(t::regclass)) i;

INSERT INTO bf_plain SELECT i FROM generate_series(1, 100000) i;
INSERT INTO bf_elevator SELECT i FROM generate_series(1, 100000) i;
INSERT INTO bf_localized SELECT i FROM generate_series(1, 100000) i;
DO $$
BEGIN
	FOR j IN 0..199 LOOP
		INSERT INTO tx_plain SELECT i FROM generate_series(j * 500 + 1, (j + 1) * 500) i;
		INSERT INTO tx_elevator SELECT i FROM generate_series(j * 500 + 1, (j + 1) * 500) i;
		INSERT INTO tx_localized SELECT i FROM generate_series(j * 500 + 1, (j + 1) * 500) i;
		COMMIT;
	END LOOP;
END;
$$;
VACUUM tx_plain, tx_elevator, tx_localized;
SELECT t AS filter, i.mode, i.items, i.flushes > 0 AS flushed,
	   i.flushes > 10 AS flushed_often, i.buffered_entries > 0 AS has_buffered
FROM unnest(ARRAY['tx_plain', 'tx_elevator', 'tx_localized']) t,
	LATERAL bloom_info(t::regclass) i;

-- no false negatives, in any mode, whatever sits in the buffers
SELECT count(*) FILTER (WHERE NOT bloom_contains('bf_plain', i)) AS fn_bf_plain,
	   count(*) FILTER (WHERE NOT bloom_contains('bf_elevator', i)) AS fn_bf_elevator,
	   count(*) FILTER (WHERE NOT bloom_contains('bf_localized', i)) AS fn_bf_localized,
	   count(*) FILTER (WHERE NOT bloom_contains('tx_plain', i)) AS fn_tx_plain,
	   count(*) FILTER (WHERE NOT bloom_contains('tx_elevator', i)) AS fn_tx_elevator,
	   count(*) FILTER (WHERE NOT bloom_contains('tx_localized', i)) AS fn_tx_localized
FROM generate_series(1, 100000) i;

-- bloom_flush applies the buffers; answers and bits are the same after
SELECT bloom_flush('tx_plain') AS plain_applied,
	   bloom_flush('tx_elevator') > 0 AS elevator_applied,
	   bloom_flush('tx_localized') > 0 AS localized_applied;
SELECT t AS filter, i.buffered_entries, i.items,
	   i.bits_set = (SELECT bits_set FROM bloom_info(replace(t, 'tx_', 'bf_')::regclass)) AS same_bits_as_bulk
FROM unnest(ARRAY['tx_plain', 'tx_elevator', 'tx_localized']) t,
	LATERAL bloom_info(t::regclass) i;
SELECT bloom_flush('tx_elevator') AS again, bloom_flush('tx_localized') AS again;
SELECT count(*) FILTER (WHERE NOT bloom_contains('tx_elevator', i)) AS fn_elevator,
	   count(*) FILTER (WHERE NOT bloom_contains('tx_localized', i)) AS fn_localized
FROM generate_series(1, 100000) i;

-- More bit positions than the consolidation memory holds (10^5 keys with
-- 10 hashes are 8 MB of positions) in a filter more than four times that
-- memory: they are distributed over temporary files by range of pages and
-- each range is set in memory (a lookup that finds the log past
-- streamsketch.change_log_limit consolidating in work_mem = 64kB;
-- bloom_flush in maintenance_work_mem = 1MB); the same bits as the same
-- keys set with default memory (one bitmap of the whole filter), and the
-- spill used temporary files.
SELECT bloom_create('sp_plain', 'int8', capacity => 300000, fp_rate => 0.001,
					mode => 'plain');
SELECT bloom_create('sp_plain_ref', 'int8', capacity => 300000, fp_rate => 0.001,
					mode => 'plain');
SELECT bloom_create('sp_elevator', 'int8', capacity => 2500000, fp_rate => 0.001,
					mode => 'elevator', buffer_size => '4MB');
SELECT bloom_create('sp_elevator_ref', 'int8', capacity => 2500000, fp_rate => 0.001,
					mode => 'elevator', buffer_size => '4MB');
SET streamsketch.change_log_limit = '64MB';
INSERT INTO sp_plain SELECT i FROM generate_series(1, 100000) i;
INSERT INTO sp_plain_ref SELECT i FROM generate_series(1, 100000) i;
INSERT INTO sp_elevator SELECT i FROM generate_series(1, 100000) i;
INSERT INTO sp_elevator_ref SELECT i FROM generate_series(1, 100000) i;
SELECT pg_catalog.pg_stat_force_next_flush();
CREATE TEMP TABLE temp_files AS
SELECT 1 AS n, 'before' AS step, temp_files FROM pg_stat_database WHERE datname = current_database();
SET work_mem = '64kB';
SET streamsketch.pending_memory = '64kB';
SET streamsketch.change_log_limit = '64kB';
SELECT bloom_contains('sp_plain', 1) AS found;
SET streamsketch.change_log_limit = '64MB';
SELECT items, buffered_entries, pending_records FROM bloom_info('sp_plain');
RESET work_mem;
SELECT pg_catalog.pg_stat_force_next_flush();
INSERT INTO temp_files
SELECT 2, 'plain', temp_files FROM pg_stat_database WHERE datname = current_database();
SELECT items, buffered_entries FROM bloom_info('sp_elevator');
SET maintenance_work_mem = '1MB';
SELECT bloom_flush('sp_elevator') AS applied;
RESET maintenance_work_mem;
RESET streamsketch.pending_memory;
RESET streamsketch.change_log_limit;
SELECT pg_catalog.pg_stat_force_next_flush();
INSERT INTO temp_files
SELECT 3, 'elevator', temp_files FROM pg_stat_database WHERE datname = current_database();
VACUUM sp_plain_ref;
SELECT bloom_flush('sp_elevator_ref') AS applied;
SELECT t, i.items, i.buffered_entries,
	   i.bits_set = (SELECT bits_set FROM bloom_info((t || '_ref')::regclass)) AS same_bits
FROM unnest(ARRAY['sp_plain', 'sp_elevator']) t, LATERAL bloom_info(t::regclass) i;
SELECT step, temp_files - lag(temp_files) OVER (ORDER BY n) >= 2 AS spilled
FROM temp_files ORDER BY n OFFSET 1;
SELECT count(*) FILTER (WHERE NOT bloom_contains('sp_plain', i)) AS fn_plain,
	   count(*) FILTER (WHERE NOT bloom_contains('sp_elevator', i)) AS fn_elevator
FROM generate_series(1, 100000) i;

-- A filter of at most four times the consolidation memory (bf_plain's
-- 23 pages; work_mem and pending_memory 64kB, a lookup past the limit
-- consolidating) is set with a bitmap per memory-sized range
-- of pages, the round's records read once per range: the same bits as
-- bf_plain, and no temporary file.
SELECT bloom_create('sp_passes', 'int8', capacity => 100000, fp_rate => 0.001,
					mode => 'plain');
SET streamsketch.change_log_limit = '64MB';
INSERT INTO sp_passes SELECT i FROM generate_series(1, 100000) i;
RESET streamsketch.change_log_limit;
SELECT pg_catalog.pg_stat_force_next_flush();
CREATE TEMP TABLE temp_files_passes AS
SELECT temp_files FROM pg_stat_database WHERE datname = current_database();
SET work_mem = '64kB';
SET streamsketch.pending_memory = '64kB';
SET streamsketch.change_log_limit = '64kB';
SELECT bloom_contains('sp_passes', 1) AS found;
RESET streamsketch.change_log_limit;
SELECT items, buffered_entries, pages,
	   bits_set = (SELECT bits_set FROM bloom_info('bf_plain')) AS same_bits_as_bulk
FROM bloom_info('sp_passes');
RESET work_mem;
RESET streamsketch.pending_memory;
SELECT pg_catalog.pg_stat_force_next_flush();
SELECT d.temp_files - t.temp_files AS temp_files
FROM pg_stat_database d, temp_files_passes t WHERE d.datname = current_database();

-- A round of at least half an elevator buffer's capacity (one large
-- transaction here) is set with the buffered entries in one elevator pass
-- (one flush), not in one pass per sub-buffer that fills.
SELECT bloom_create('sp_big', 'int8', capacity => 100000, fp_rate => 0.001,
					mode => 'elevator', buffer_size => '64kB');
INSERT INTO sp_big SELECT i FROM generate_series(1, 100000) i;
VACUUM sp_big;
SELECT items, buffered_entries, flushes,
	   bits_set = (SELECT bits_set FROM bloom_info('bf_elevator')) AS same_bits_as_bulk
FROM bloom_info('sp_big');

-- So is a localized round of at least half the sub-buffers' capacity
-- (bf_localized's one INSERT): its bits are set directly (one flush), nothing waits in
-- a sub-buffer, and the bits equal those of small transactions flushed
-- (tx_localized, above).
SELECT items, buffered_entries, flushes FROM bloom_info('bf_localized');

-- A larger filter whose ranges of pages do not fit in 64kB as bitmaps:
-- each range is sorted and set in parts; the bits equal those of the same
-- keys consolidated in the default memory (each range set as a bitmap).
SELECT bloom_create('sp_parts', 'int8', capacity => 1000000, fp_rate => 0.001,
					mode => 'plain');
SELECT bloom_create('sp_parts_ref', 'int8', capacity => 1000000, fp_rate => 0.001,
					mode => 'plain');
SET streamsketch.change_log_limit = '64MB';
INSERT INTO sp_parts SELECT i FROM generate_series(1, 100000) i;
INSERT INTO sp_parts_ref SELECT i FROM generate_series(1, 100000) i;
RESET streamsketch.change_log_limit;
SET work_mem = '64kB';
SET streamsketch.pending_memory = '64kB';
SELECT items, pages FROM bloom_info('sp_parts');
RESET work_mem;
RESET streamsketch.pending_memory;
SELECT r.items = p.items AND r.bits_set = p.bits_set AS same_bits
FROM bloom_info('sp_parts') p, bloom_info('sp_parts_ref') r;
SELECT count(*) FILTER (WHERE NOT bloom_contains('sp_parts', i)) AS fn_parts
FROM generate_series(1, 100000) i;

-- false-positive rate on 10^6 absent keys, every insert applied to the
-- bits: within 1.5x of (1-e^{-kn/m})^k (buffered inserts are only found by
-- their own key, so before a flush the rate is lower)
CREATE TEMP TABLE fp AS
SELECT avg(bloom_contains('tx_plain', i)::int) AS plain,
	   avg(bloom_contains('tx_elevator', i)::int) AS elevator,
	   avg(bloom_contains('tx_localized', i)::int) AS localized
FROM generate_series(1000001, 2000000) i;
SELECT round(plain, 4) AS plain, round(elevator, 4) AS elevator,
	   round(localized, 4) AS localized FROM fp;
SELECT (SELECT plain FROM fp) / false_positive_rate BETWEEN 1 / 1.5 AND 1.5 AS plain_near_theory,
	   false_positive_rate <= 0.0011 AS theory_near_requested
FROM bloom_info('tx_plain');
SELECT (SELECT elevator FROM fp) / false_positive_rate BETWEEN 1 / 1.5 AND 1.5 AS elevator_near_theory
FROM bloom_info('tx_elevator');
SELECT (SELECT localized FROM fp) / false_positive_rate BETWEEN 1 / 1.5 AND 1.5 AS localized_near_theory
FROM bloom_info('tx_localized');

-- transactions: own inserts visible, rollback leaves no trace
BEGIN;
INSERT INTO tx_elevator VALUES (-1);
INSERT INTO tx_localized VALUES (-1);
INSERT INTO tx_plain VALUES (-1);
SELECT bloom_contains('tx_elevator', -1) AS e_inside,
	   bloom_contains('tx_localized', -1) AS l_inside,
	   bloom_contains('tx_plain', -1) AS p_inside,
	   bloom_contains('tx_plain', -2) AS other_absent;
ROLLBACK;
SELECT bloom_contains('tx_elevator', -1) AS e_after_rollback,
	   bloom_contains('tx_localized', -1) AS l_after_rollback,
	   bloom_contains('tx_plain', -1) AS p_after_rollback;
SELECT t AS filter, i.items FROM unnest(ARRAY['tx_plain', 'tx_elevator', 'tx_localized']) t,
	LATERAL bloom_info(t::regclass) i;
BEGIN;
INSERT INTO tx_localized VALUES (-3);
SAVEPOINT s;
INSERT INTO tx_localized VALUES (-4);
ROLLBACK TO s;
SELECT bloom_contains('tx_localized', -3) AS kept, bloom_contains('tx_localized', -4) AS rolled_back;
COMMIT;
SELECT bloom_contains('tx_localized', -3) AS committed, bloom_contains('tx_localized', -4) AS absent;
-- own inserts are visible in parallel plans too (the function runs in the
-- leader, which holds the pending inserts)
CREATE TABLE probe AS SELECT -7::int8 AS id;
BEGIN;
INSERT INTO tx_localized VALUES (-7);
SET LOCAL force_parallel_mode = on;
SELECT bloom_contains('tx_localized', id) AS own_insert_seen FROM probe;
ROLLBACK;
DROP TABLE probe;

-- TRUNCATE is transactional and hides the committed bits inside
BEGIN;
TRUNCATE tx_plain;
SELECT bloom_contains('tx_plain', 1) AS truncated_inside;
INSERT INTO tx_plain VALUES (1);
SELECT bloom_contains('tx_plain', 1) AS reinserted, bloom_contains('tx_plain', 2) AS gone;
ROLLBACK;
SELECT bloom_contains('tx_plain', 2) AS kept;
TRUNCATE tx_plain;
SELECT bloom_contains('tx_plain', 2) AS truncated, items, bits_set, relation_pages
FROM bloom_info('tx_plain');

-- key types: text, coercions, NULLs, toasted values, COPY
SELECT bloom_create('words', 'text', capacity => 1000, fp_rate => 0.01);
\d words
INSERT INTO words VALUES ('apple'), ('pear'), (NULL);
COPY words FROM stdin;
plum
\.
SELECT bloom_contains('words', 'apple') AS apple, bloom_contains('words', 'plum') AS plum,
	   bloom_contains('words', 'kiwi'::varchar) AS kiwi,
	   bloom_contains('words', NULL::text) AS null_key;
SELECT items FROM bloom_info('words');
SELECT bloom_contains('seen', 5::int2) AS smallint_key, bloom_contains('seen', 5) AS int_key;
INSERT INTO words SELECT repeat('x', 100000);
SELECT bloom_contains('words', repeat('x', 100000)) AS toasted;

-- unlogged tables
SELECT bloom_create('scratch', 'int', mode => 'elevator', buffer_size => '16kB', unlogged => true);
SELECT relpersistence FROM pg_class WHERE relname = 'scratch';
INSERT INTO scratch SELECT generate_series(1, 5000);
SELECT count(*) FILTER (WHERE NOT bloom_contains('scratch', i)) AS fn FROM generate_series(1, 5000) i;
SELECT mode, buffer_pages, subbuffer_capacity FROM bloom_info('scratch');
-- no buffering at all
SELECT bloom_create('nobuf', 'int', mode => 'localized', buffer_size => '0');
INSERT INTO nobuf SELECT generate_series(1, 100);
SELECT buffer_pages, flushes, bloom_flush('nobuf') AS flushed,
	   bloom_contains('nobuf', 50) AS found FROM bloom_info('nobuf');

-- VACUUM FULL copies the pages
VACUUM FULL tx_localized;
SELECT bloom_contains('tx_localized', 77) AS after_vacuum_full;

-- privileges
CREATE ROLE regress_bloom_reader;
GRANT SELECT ON words TO regress_bloom_reader;
SET ROLE regress_bloom_reader;
SELECT bloom_contains('words', 'apple') AS reader_can_query;
SELECT bloom_test_error($$SELECT bloom_contains('seen', 1)$$);
SELECT bloom_test_error($$SELECT bloom_flush('words')$$);
SELECT bloom_test_error($$INSERT INTO words VALUES ('x')$$);
RESET ROLE;
DROP OWNED BY regress_bloom_reader;
DROP ROLE regress_bloom_reader;

-- errors
SELECT bloom_test_error($$SELECT bloom_create('bad', 'int', capacity => 0)$$);
SELECT bloom_test_error($$SELECT bloom_create('bad', 'int', fp_rate => 0)$$);
SELECT bloom_test_error($$SELECT bloom_create('bad', 'int', fp_rate => 1)$$);
SELECT bloom_test_error($$SELECT bloom_create('bad', 'int', fp_rate => 1e-25)$$);
SELECT bloom_test_error($$SELECT bloom_create('bad', 'int', capacity => 9000000000000000000)$$);
SELECT bloom_test_error($$SELECT bloom_create('bad', 'int', mode => 'forest')$$);
SELECT bloom_test_error($$SELECT bloom_create('bad', 'int', buffer_size => 'lots')$$);
SELECT bloom_test_error($$SELECT bloom_create('bad', 'int', buffer_size => '-1')$$);
SELECT bloom_test_error($$SELECT bloom_create(NULL, 'int')$$);
SELECT bloom_test_error($$SELECT bloom_create('seen', 'int')$$);
SELECT bloom_test_error($$SET streamsketch.bloom_mode = 'forest'$$);
SELECT bloom_test_error($$SET streamsketch.bloom_fp_rate = 0.9$$);
SELECT bloom_test_error($$SELECT bloom_contains('seen', 'x'::text)$$);
SELECT bloom_test_error($$SELECT bloom_contains('seen', 5000000000::numeric)$$);
CREATE TABLE heap_b (k int);
SELECT bloom_test_error($$SELECT bloom_contains('heap_b', 1)$$);
SELECT bloom_test_error($$SELECT bloom_info('heap_b')$$);
SELECT bloom_test_error($$SELECT bloom_flush('heap_b')$$);
SELECT bloom_test_error($$SELECT bloom_contains('no_such_table', 1)$$);
SELECT bloom_test_error($$CREATE TABLE bad2 (a int, b int) USING bloom_filter$$);
SELECT bloom_test_error($$CREATE TABLE bad0 () USING bloom_filter$$);
SELECT bloom_test_error($$UPDATE seen SET id = 1$$);
SELECT bloom_test_error($$DELETE FROM seen$$);
SELECT bloom_test_error($$INSERT INTO seen VALUES (1) ON CONFLICT (id) DO NOTHING$$);
SELECT bloom_test_error($$CREATE INDEX ON seen (id)$$);
SELECT bloom_test_error($$ALTER TABLE seen ADD COLUMN x int$$);
SELECT bloom_test_error($$CREATE TRIGGER t BEFORE INSERT ON seen FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()$$);
SELECT bloom_test_error($$ALTER TABLE heap_b SET ACCESS METHOD bloom_filter$$);
SELECT proname FROM pg_proc WHERE proname LIKE 'bloom%delete%';
-- prepared transactions (two-phase commit) are tested in twophase.sql

-- parameters are kept for pg_dump and forgotten on DROP
DROP TABLE seen, words, heap_b;
SELECT count(*) AS left_behind FROM pg_catalog.pg_seclabels WHERE objname IN ('seen', 'words');
