-- twophase: prepared transactions (two-phase commit).  A prepared
-- transaction's batch is appended to the change log at PREPARE TRANSACTION
-- and counts once COMMIT PREPARED runs; ROLLBACK PREPARED leaves no trace;
-- consolidation (the flush functions, VACUUM) keeps a prepared batch.
--
-- This test needs max_prepared_transactions > 0.  A server with the default
-- (0) refuses every PREPARE TRANSACTION: its output is twophase_1.out.
SET client_min_messages = warning;
LOAD 'streamsketch';

-- bcms: a prepared transaction's rows count once COMMIT PREPARED runs, in
-- any session; ROLLBACK PREPARED leaves no trace
SELECT bcms_create('tp_clicks', 'text', epsilon => 0.001);
INSERT INTO tp_clicks SELECT 'u' || (i % 10) FROM generate_series(1, 100) i;
BEGIN;
INSERT INTO tp_clicks VALUES ('p'), ('p');
PREPARE TRANSACTION 'tp_bcms_1';
SELECT bcms_estimate('tp_clicks', 'p'::text) AS p_prepared;
SELECT bcms_flush('tp_clicks') IS NOT NULL AS flushed;
SELECT bcms_estimate('tp_clicks', 'p'::text) AS p_prepared_flushed;
COMMIT PREPARED 'tp_bcms_1';
SELECT bcms_estimate('tp_clicks', 'p'::text) AS p_committed;
BEGIN;
INSERT INTO tp_clicks VALUES ('q');
PREPARE TRANSACTION 'tp_bcms_2';
ROLLBACK PREPARED 'tp_bcms_2';
SELECT bcms_estimate('tp_clicks', 'q'::text) AS q_rolled_back;
SELECT items, total_weight FROM bcms_info('tp_clicks');

-- bloom_filter: a prepared transaction's keys are found once COMMIT
-- PREPARED runs; ROLLBACK PREPARED leaves no trace
SELECT bloom_create('tp_seen', 'bigint', capacity => 100000);
INSERT INTO tp_seen SELECT i FROM generate_series(1, 1000) i;
BEGIN;
INSERT INTO tp_seen VALUES (-1), (-2);
PREPARE TRANSACTION 'tp_bloom_1';
SELECT bloom_contains('tp_seen', -1) AS prepared_found;
SELECT bloom_flush('tp_seen') IS NOT NULL AS flushed;
SELECT bloom_contains('tp_seen', -1) AS prepared_flushed_found;
COMMIT PREPARED 'tp_bloom_1';
SELECT bloom_contains('tp_seen', -1) AS committed_found, (bloom_info('tp_seen')).items;
BEGIN;
INSERT INTO tp_seen VALUES (-3);
PREPARE TRANSACTION 'tp_bloom_2';
ROLLBACK PREPARED 'tp_bloom_2';
SELECT bloom_contains('tp_seen', -3) AS rolled_back_found, (bloom_info('tp_seen')).items;

-- quotient_filter: a prepared transaction's inserts and deletes count once
-- COMMIT PREPARED runs; ROLLBACK PREPARED leaves no trace
SELECT qf_create('tp_qf', 'int', capacity => 1000, counted => true);
INSERT INTO tp_qf VALUES (1, 3), (2, 4);
BEGIN;
INSERT INTO tp_qf VALUES (5, 7);
PREPARE TRANSACTION 'tp_qf_1';
SELECT qf_count('tp_qf', 5) AS prepared;
VACUUM tp_qf;
SELECT qf_count('tp_qf', 5) AS prepared_vacuumed;
COMMIT PREPARED 'tp_qf_1';
SELECT qf_count('tp_qf', 5) AS committed;
BEGIN;
SELECT qf_delete('tp_qf', 5, 3);
PREPARE TRANSACTION 'tp_qf_2';
ROLLBACK PREPARED 'tp_qf_2';
SELECT qf_count('tp_qf', 5) AS delete_rolled_back;
SELECT items, total_count FROM qf_info('tp_qf');

-- nothing is left prepared
SELECT count(*) AS still_prepared FROM pg_prepared_xacts WHERE gid LIKE 'tp\_%';
DROP TABLE tp_clicks, tp_seen, tp_qf;
