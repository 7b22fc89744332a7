-- bcms: the buffered count-min sketch table access method
\set VERBOSITY default
SET client_min_messages = warning;
-- the counters and reports below are read after this session's own
-- consolidation: its commits queue nothing for a background worker,
-- which would hold the consolidation lock meanwhile
SET streamsketch.background_consolidation = off;
LOAD 'streamsketch';

-- GUC defaults are captured at CREATE TABLE
SHOW streamsketch.bcms_epsilon;
SHOW streamsketch.bcms_delta;
SHOW streamsketch.bcms_mode;
SHOW streamsketch.bcms_buffer_size;
SHOW streamsketch.pending_memory;
SET streamsketch.bcms_epsilon = 0.001;
CREATE TABLE clicks (url text) USING bcms;
RESET streamsketch.bcms_epsilon;
SELECT mode, epsilon, delta, width, depth, sketch_pages, buffer_pages,
       subbuffer_capacity, conservative, items, total_weight, buffered_entries
FROM bcms_info('clicks');
-- the parameters' copy that pg_dump keeps: the table's label
SELECT objname, label FROM pg_catalog.pg_seclabels WHERE provider = 'streamsketch' AND objname = 'clicks';

-- a sketch has no rows to enumerate (its records uncombined, so that
-- 5,000 of them wait in the change log for bcms_info below)
SET streamsketch.test_combine_min_records = 2147483647;
INSERT INTO clicks SELECT 'u' || (i % 50) FROM generate_series(1, 5000) i;
RESET streamsketch.test_combine_min_records;
SELECT * FROM clicks;
SELECT count(*) FROM clicks;
SELECT bcms_estimate('clicks', 'u7'::text) AS u7, bcms_estimate('clicks', 'absent'::text) AS absent;
-- varchar is binary-coercible to text; an int key is not
SELECT bcms_estimate('clicks', 'u7'::varchar);
SELECT bcms_estimate('clicks', 7);
SELECT bcms_estimate('clicks', NULL::text);
-- bcms_info reads the change log without consolidating it: its counters
-- include the committed rows still there (pending_records)
SELECT items, total_weight, buffered_entries, pending_records,
       pending_bytes > 0 AS log_bytes FROM bcms_info('clicks');
SELECT bcms_flush('clicks');
SELECT items, total_weight, buffered_entries, pending_records, pending_bytes
FROM bcms_info('clicks');
SELECT bcms_estimate('clicks', 'u7'::text);

-- NULL keys are skipped
INSERT INTO clicks VALUES (NULL), ('u7');
SELECT bcms_estimate('clicks', 'u7'::text), (SELECT items FROM bcms_info('clicks'));

-- COPY feeds it too
COPY clicks FROM stdin;
u7
u7
\.
SELECT bcms_estimate('clicks', 'u7'::text);

-- toasted and compressed keys hash like their plain form
CREATE TABLE big (k text) USING bcms;
INSERT INTO big VALUES (repeat('x', 100000));
CREATE TEMP TABLE src (k text);
ALTER TABLE src ALTER COLUMN k SET STORAGE external;
INSERT INTO src VALUES (repeat('x', 100000));
INSERT INTO big SELECT k FROM src;
SELECT bcms_estimate('big', repeat('x', 100000));

-- transactions: own changes visible, rollback leaves no trace
BEGIN;
INSERT INTO clicks VALUES ('t1'), ('t1'), ('t1');
SELECT bcms_estimate('clicks', 't1'::text) AS inside;
ROLLBACK;
SELECT bcms_estimate('clicks', 't1'::text) AS after_rollback;
BEGIN;
INSERT INTO clicks VALUES ('t2');
SAVEPOINT s1;
INSERT INTO clicks VALUES ('t2'), ('t2');
SELECT bcms_estimate('clicks', 't2'::text) AS in_savepoint;
ROLLBACK TO SAVEPOINT s1;
SELECT bcms_estimate('clicks', 't2'::text) AS after_rollback_to;
SAVEPOINT s2;
INSERT INTO clicks VALUES ('t2');
RELEASE SAVEPOINT s2;
COMMIT;
SELECT bcms_estimate('clicks', 't2'::text) AS committed;
-- an error inside a plpgsql exception block rolls back its inserts
DO $$
BEGIN
	INSERT INTO clicks VALUES ('t3');
	BEGIN
		INSERT INTO clicks VALUES ('t3'), ('t3');
		PERFORM 1 / 0;
	EXCEPTION WHEN division_by_zero THEN
		NULL;
	END;
END;
$$;
SELECT bcms_estimate('clicks', 't3'::text) AS t3;
-- pending changes spill to a temporary file beyond streamsketch.pending_memory
SET streamsketch.pending_memory = '64kB';
BEGIN;
INSERT INTO clicks SELECT 'spill' FROM generate_series(1, 20000);
SAVEPOINT s;
INSERT INTO clicks SELECT 'spill' FROM generate_series(1, 7000);
ROLLBACK TO s;
INSERT INTO clicks SELECT 'spill' FROM generate_series(1, 300);
SELECT bcms_estimate('clicks', 'spill'::text) AS spill_inside;
COMMIT;
RESET streamsketch.pending_memory;
SELECT bcms_estimate('clicks', 'spill'::text) AS spill_committed;
-- TRUNCATE in a transaction discards its earlier inserts, and rolls back
BEGIN;
INSERT INTO clicks VALUES ('tr');
TRUNCATE clicks;
SELECT bcms_estimate('clicks', 'u7'::text) AS truncated_u7, bcms_estimate('clicks', 'tr'::text) AS truncated_tr;
INSERT INTO clicks VALUES ('tr');
SELECT bcms_estimate('clicks', 'tr'::text) AS tr_after_truncate;
ROLLBACK;
SELECT bcms_estimate('clicks', 'u7'::text) AS u7_kept, bcms_estimate('clicks', 'tr'::text) AS tr_gone;
SELECT objname, label FROM pg_catalog.pg_seclabels WHERE provider = 'streamsketch' AND objname = 'clicks';
-- prepared transactions (two-phase commit) are tested in twophase.sql

-- weighted updates
SELECT bcms_create('bytes', 'inet', epsilon => 0.001, weighted => true);
\d bytes
INSERT INTO bytes VALUES ('10.0.0.1', 1500), ('10.0.0.1', 40), ('10.0.0.2', 9000), ('10.0.0.3', 0), ('10.0.0.4', NULL);
SELECT bcms_estimate('bytes', '10.0.0.1'::inet) AS a, bcms_estimate('bytes', '10.0.0.2'::inet) AS b,
       bcms_estimate('bytes', '10.0.0.3'::inet) AS c;
SELECT items, total_weight FROM bcms_info('bytes');
INSERT INTO bytes VALUES ('10.0.0.1', -1);
-- counters saturate instead of wrapping
INSERT INTO bytes VALUES ('10.0.0.9', 9223372036854775807), ('10.0.0.9', 9223372036854775807);
SELECT bcms_estimate('bytes', '10.0.0.9'::inet) AS saturated;
CREATE TABLE w2 (k int, w int) USING bcms;
INSERT INTO w2 VALUES (1, 3), (1, 4);
SELECT bcms_estimate('w2', 1), bcms_estimate('w2', 1::int8), bcms_estimate('w2', 1::int2);
SELECT bcms_estimate('w2', 3000000000);

-- bad table definitions
CREATE TABLE bad1 (a int, b int, c int) USING bcms;
CREATE TABLE bad2 (a int, b text) USING bcms;
CREATE TABLE bad3 () USING bcms;

-- parameters and their errors
SELECT bcms_create('p1', 'int', epsilon => 0);
SELECT bcms_create('p1', 'int', epsilon => 1.5);
SELECT bcms_create('p1', 'int', delta => 0);
SELECT bcms_create('p1', 'int', depth => 0);
SELECT bcms_create('p1', 'int', depth => 33);
SELECT bcms_create('p1', 'int', width => 0);
SELECT bcms_create('p1', 'int', epsilon => 1e-12);
SELECT bcms_create('p1', 'int', mode => 'fast');
SELECT bcms_create('p1', 'int', mode => 'plain', conservative => true);
SELECT bcms_create('p1', 'int', buffer_size => 'lots');
SELECT bcms_create(NULL, 'int');
SET streamsketch.bcms_epsilon = 0;
SET streamsketch.bcms_mode = 'fast';
SET streamsketch.nonexistent = 1;
SELECT bcms_create('p1', 'int', width => 1000, depth => 3, buffer_size => '0');
SELECT mode, epsilon, round(delta::numeric, 4) AS delta, width, depth, sketch_pages, buffer_pages, subbuffer_capacity FROM bcms_info('p1');
INSERT INTO p1 SELECT i % 7 FROM generate_series(1, 700) i;
SELECT bcms_estimate('p1', 3);
SELECT bcms_create('p2', 'int', width => 5000, depth => 4, buffer_size => '64kB');
SELECT width, depth, sketch_pages, buffer_pages, subbuffer_capacity FROM bcms_info('p2');
SELECT bcms_create('myschema_missing.p3', 'int');
CREATE SCHEMA "Odd Schema";
SELECT bcms_create('"Odd Schema"."p 3"', 'text', epsilon => 0.01);
INSERT INTO "Odd Schema"."p 3" VALUES ('a');
SELECT bcms_estimate('"Odd Schema"."p 3"', 'a'::text);

-- functions on tables that are not bcms
CREATE TABLE heap_t (k int);
SELECT bcms_estimate('heap_t', 1);
SELECT bcms_info('heap_t');
SELECT bcms_flush('heap_t');

-- unsupported operations fail with SQLSTATE 0A000
\set VERBOSITY sqlstate
UPDATE clicks SET url = 'x';
DELETE FROM clicks;
DELETE FROM clicks WHERE url = 'u1';
MERGE INTO clicks c USING (VALUES ('a')) v(u) ON c.url = v.u WHEN MATCHED THEN DELETE;
CREATE INDEX ON clicks (url);
CREATE UNIQUE INDEX ON clicks (url);
CREATE FUNCTION trg() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER t BEFORE INSERT ON clicks FOR EACH ROW EXECUTE FUNCTION trg();
ALTER TABLE clicks ADD COLUMN extra int;
ALTER TABLE clicks ALTER COLUMN url TYPE varchar;
ALTER TABLE clicks SET LOGGED;
ALTER TABLE clicks SET UNLOGGED;
ALTER TABLE heap_t SET ACCESS METHOD bcms;
ALTER TABLE clicks ADD PRIMARY KEY (url);
INSERT INTO clicks VALUES ('a') ON CONFLICT (url) DO NOTHING;
SELECT * FROM clicks FOR UPDATE;
CREATE PUBLICATION pub FOR TABLE clicks;
\set VERBOSITY default
-- allowed: they keep the pages
ALTER TABLE clicks ALTER COLUMN url SET DEFAULT 'dflt';
INSERT INTO clicks DEFAULT VALUES;
SELECT bcms_estimate('clicks', 'dflt'::text) AS dflt;
ALTER TABLE clicks RENAME TO clicks2;
ALTER TABLE clicks2 RENAME TO clicks;
VACUUM clicks;
ANALYZE clicks;
VACUUM FULL clicks;
SELECT bcms_estimate('clicks', 'u7'::text) AS after_vacuum_full;
SELECT count(*) AS labels FROM pg_catalog.pg_seclabel WHERE provider = 'streamsketch' AND objoid NOT IN (SELECT oid FROM pg_catalog.pg_class);
SELECT bcms_estimate('clicks', 'u7'::text) AS u7;
SELECT * FROM clicks TABLESAMPLE SYSTEM (50);
EXPLAIN (COSTS OFF) SELECT * FROM clicks;
-- CREATE TABLE AS feeds the new sketch
CREATE TABLE ctas USING bcms AS SELECT 'u' || (i % 3) AS k FROM generate_series(1, 30) i;
SELECT bcms_estimate('ctas', 'u1'::text);
-- dropping forgets the parameters
DROP TABLE ctas;
SELECT count(*) FROM pg_catalog.pg_seclabels WHERE objname = 'ctas';

-- unlogged and temporary sketches
CREATE UNLOGGED TABLE ul (k int) USING bcms;
INSERT INTO ul SELECT 1 FROM generate_series(1, 10);
SELECT bcms_estimate('ul', 1);
CREATE TEMP TABLE tmp_s (k int) USING bcms;
INSERT INTO tmp_s SELECT 1 FROM generate_series(1, 10);
SELECT bcms_estimate('tmp_s', 1);

-- privileges
CREATE ROLE regress_bcms_reader;
SET ROLE regress_bcms_reader;
SELECT bcms_estimate('clicks', 'u7'::text);
INSERT INTO clicks VALUES ('x');
RESET ROLE;
GRANT SELECT ON clicks TO regress_bcms_reader;
SET ROLE regress_bcms_reader;
SELECT bcms_estimate('clicks', 'u7'::text) AS granted;
SELECT bcms_flush('clicks');
RESET ROLE;
REVOKE ALL ON clicks FROM regress_bcms_reader;
DROP ROLE regress_bcms_reader;

-- merging an in-memory cms built with the same epsilon/delta
SELECT bcms_create('m', 'text', epsilon => 0.001, delta => 0.01);
INSERT INTO m VALUES ('a'), ('b');
BEGIN;
SELECT bcms_merge('m', cms_agg(x, 0.001, 0.01))
FROM (SELECT 'a' || (i % 3) FROM generate_series(1, 30) i
	  UNION ALL SELECT 'a' FROM generate_series(1, 5)) s(x);
-- visible inside the transaction, before it is applied
SELECT bcms_estimate('m', 'a'::text) AS a_inside, bcms_estimate('m', 'a1'::text) AS a1_inside;
COMMIT;
SELECT bcms_estimate('m', 'a'::text) AS a, bcms_estimate('m', 'a1'::text) AS a1,
	   bcms_estimate('m', 'b'::text) AS b;
SELECT items, total_weight FROM bcms_info('m');
BEGIN;
SELECT bcms_merge('m', cms_agg(x, 0.001, 0.01)) FROM (VALUES ('a')) v(x);
ROLLBACK;
SELECT bcms_estimate('m', 'a'::text) AS a_after_rollback;
-- the cms and the table agree key by key
SELECT bcms_create('m2', 'text', epsilon => 0.001, delta => 0.01);
INSERT INTO m2 SELECT 'k' || (i % 97) FROM generate_series(1, 5000) i;
SELECT count(*) AS disagreements
FROM (SELECT cms_agg(x, 0.001, 0.01) AS c
	  FROM (SELECT 'k' || (i % 97) FROM generate_series(1, 5000) i) s(x)) agg,
	 generate_series(0, 120) j
WHERE cms_estimate(c, 'k' || j) <> bcms_estimate('m2', 'k' || j);
-- mismatched parameters
SELECT bcms_merge('m', cms_agg(x, 0.01, 0.01)) FROM (VALUES ('a')) v(x);
SELECT bcms_merge('m', cms_agg(x, 0.001, 0.01)) FROM (VALUES (1)) v(x);
SELECT bcms_create('mp', 'text', epsilon => 0.001, delta => 0.01, mode => 'plain');
SELECT bcms_merge('mp', cms_agg(x, 0.001, 0.01)) FROM (VALUES ('a')) v(x);

-- VACUUM gives back the tail of log pages a large transaction left free
SELECT bcms_create('tail', 'int8', epsilon => 0.01, delta => 0.1);
INSERT INTO tail VALUES (1);
SELECT bcms_estimate('tail', 1::int8) AS one;
SELECT pg_relation_size('tail') AS size_before \gset
-- (uncombined: the rows of one key would make one record)
SET streamsketch.test_combine_min_records = 2147483647;
INSERT INTO tail SELECT 1 FROM generate_series(1, 100000);
RESET streamsketch.test_combine_min_records;
SELECT pg_relation_size('tail') > :size_before AS grew;
-- VACUUM VERBOSE says what it did
VACUUM (VERBOSE) tail;
SELECT pg_relation_size('tail') <= :size_before AS tail_given_back,
	   bcms_estimate('tail', 1::int8) AS estimate, items
FROM bcms_info('tail');
INSERT INTO tail VALUES (1);
SELECT bcms_estimate('tail', 1::int8) AS after_next_commit;

-- Consolidation in several passes (maintenance_work_mem in the flush, or
-- streamsketch.pending_memory if larger, bounds one pass: 60,000 records
-- are about 10 MB of entries for plain mode, one per row, and 3 MB for
-- conservative buffered mode, one per page, so 1MB makes about ten and
-- three): every estimate read through the log equals the estimate after
-- the consolidation, and none is below the true count.
CREATE TEMP TABLE passes_truth AS
SELECT k, count(*) AS n
FROM (SELECT g % 5000 FROM generate_series(1, 30000) g
	  UNION ALL SELECT g % 7000 FROM generate_series(1, 30000) g) s(k)
GROUP BY k;
SELECT bcms_create('passes_plain', 'int8', width => 20000, depth => 5, mode => 'plain');
SELECT bcms_create('passes_cons', 'int8', width => 20000, depth => 5, conservative => true);
SET streamsketch.change_log_limit = '64MB';
INSERT INTO passes_plain SELECT g % 5000 FROM generate_series(1, 30000) g;
INSERT INTO passes_plain SELECT g % 7000 FROM generate_series(1, 30000) g;
INSERT INTO passes_cons SELECT g % 5000 FROM generate_series(1, 30000) g;
INSERT INTO passes_cons SELECT g % 7000 FROM generate_series(1, 30000) g;
CREATE TEMP TABLE passes_log AS
SELECT k, bcms_estimate('passes_plain', k) AS plain, bcms_estimate('passes_cons', k) AS cons
FROM generate_series(0, 7999) k;
SET maintenance_work_mem = '1MB';
SET streamsketch.pending_memory = '64kB';
SELECT bcms_flush('passes_plain') AS plain_subbuffer_entries,
	   bcms_flush('passes_cons') > 0 AS cons_subbuffers_applied;
RESET maintenance_work_mem;
RESET streamsketch.pending_memory;
RESET streamsketch.change_log_limit;
SELECT count(*) FILTER (WHERE l.plain <> bcms_estimate('passes_plain', l.k)) AS plain_changed,
	   count(*) FILTER (WHERE l.cons <> bcms_estimate('passes_cons', l.k)) AS cons_changed,
	   count(*) FILTER (WHERE l.plain < coalesce(t.n, 0) OR l.cons < coalesce(t.n, 0)) AS undercounts
FROM passes_log l LEFT JOIN passes_truth t USING (k);
SELECT p.buffered_entries AS plain_left, c.buffered_entries AS cons_left
FROM bcms_info('passes_plain') p, bcms_info('passes_cons') c;
