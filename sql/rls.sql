-- Row-level security: every function that returns a structure's rows or
-- facts about its keys (estimates, membership, counts, reports, samples,
-- groups) refuses with 42501 when policies apply to the caller, and works
-- where PostgreSQL lets a query bypass them (the owner without FORCE ROW
-- LEVEL SECURITY, a BYPASSRLS role, a table without row security); with
-- row_security = off it raises SELECT's own error.  Plain SELECT, which
-- the executor answers with the policies applied, shows only their rows.
-- The *_info functions give counts, not keys, and stay allowed.
SET client_min_messages = warning;
CREATE ROLE regress_rls_owner;
CREATE ROLE regress_rls_reader;
CREATE ROLE regress_rls_bypass BYPASSRLS;
CREATE SCHEMA regress_rls;
GRANT CREATE, USAGE ON SCHEMA regress_rls TO regress_rls_owner;
GRANT USAGE ON SCHEMA regress_rls TO regress_rls_reader, regress_rls_bypass;
SET search_path = regress_rls, public;

-- One structure of each kind, owned by an ordinary role, with keys 1..20
-- (five times each in the lert, whose threshold 4 reports every key, and
-- three times each in the cbt) and a policy that shows only the keys
-- below 10.
SET ROLE regress_rls_owner;
CREATE TABLE rls_bcms (k int) USING bcms;
CREATE TABLE rls_qf (k int) USING quotient_filter;
CREATE TABLE rls_qf_target (k int) USING quotient_filter;
CREATE TABLE rls_bloom (k int) USING bloom_filter;
SELECT lert_create('rls_lert', 'int', threshold => 4, variant => 'immediate');
SELECT cbt_create('rls_cbt', group_by => 'k int', aggregates => 'count(*) AS n');
SELECT bfile_create('rls_bfile', 'k int', sample_size => 1000);
INSERT INTO rls_bcms SELECT g FROM generate_series(1, 20) g;
INSERT INTO rls_qf SELECT g FROM generate_series(1, 20) g;
INSERT INTO rls_bloom SELECT g FROM generate_series(1, 20) g;
INSERT INTO rls_lert SELECT g FROM generate_series(1, 20) g, generate_series(1, 5);
INSERT INTO rls_cbt (k) SELECT g FROM generate_series(1, 20) g, generate_series(1, 3);
INSERT INTO rls_bfile SELECT g FROM generate_series(1, 20) g;
-- every report made (a background round may be running: this waits)
SELECT lert_flush('rls_lert') >= 0 AS flushed;
DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['rls_bcms', 'rls_qf', 'rls_bloom', 'rls_lert',
							 'rls_cbt', 'rls_bfile'] LOOP
		EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
		EXECUTE format('CREATE POLICY low ON %I USING (%I < 10)', t,
					   CASE WHEN t = 'rls_lert' THEN 'key' ELSE 'k' END);
		EXECUTE format('GRANT SELECT ON %I TO regress_rls_reader, regress_rls_bypass', t);
	END LOOP;
END;
$$;
-- qf_merge's target has no policies: the reader may insert into it
GRANT SELECT, INSERT ON rls_qf_target TO regress_rls_reader, regress_rls_bypass;
RESET ROLE;

-- The calls: reads = true for the functions that return rows or facts
-- about keys (each asks about key 15, which the policy hides), false for
-- plain SELECT and the functions that give only counts.
CREATE TABLE rls_calls (id int, fn text, stmt text, reads bool);
INSERT INTO rls_calls VALUES
(1, 'SELECT rls_lert', 'SELECT format(''%s rows, max %s'', count(*), max(key)) FROM rls_lert', false),
(2, 'SELECT rls_cbt', 'SELECT format(''%s rows, max %s'', count(*), max(k)) FROM rls_cbt', false),
(3, 'SELECT rls_bfile', 'SELECT format(''%s rows, max %s'', count(*), max(k)) FROM rls_bfile', false),
(10, 'bcms_estimate', 'SELECT bcms_estimate(''rls_bcms'', 15) >= 1', true),
(11, 'qf_contains', 'SELECT qf_contains(''rls_qf'', 15)', true),
(12, 'qf_count', 'SELECT qf_count(''rls_qf'', 15) >= 1', true),
(13, 'qf_merge', 'SELECT qf_merge(''rls_qf_target'', ''rls_qf'') > 0', true),
(14, 'bloom_contains', 'SELECT bloom_contains(''rls_bloom'', 15)', true),
(15, 'lert_count', 'SELECT lert_count(''rls_lert'', 15)', true),
(16, 'lert_reported', 'SELECT lert_reported(''rls_lert'', 15)', true),
(17, 'lert_reports', 'SELECT format(''%s rows, max %s'', count(*), max(key::int)) FROM lert_reports(''rls_lert'')', true),
(18, 'cbt_lookup', 'SELECT k || '': '' || n FROM cbt_lookup(NULL::rls_cbt, 15)', true),
(19, 'bfile_subsample', 'SELECT format(''%s rows, max %s'', count(*), max(k)) FROM bfile_subsample(NULL::rls_bfile, 100)', true),
(20, 'bfile_window', 'SELECT format(''%s rows, max %s'', count(*), max(k)) FROM bfile_window(NULL::rls_bfile, 0, 100)', true),
(30, 'bcms_info', 'SELECT items FROM bcms_info(''rls_bcms'')', false),
(31, 'qf_info', 'SELECT items + pending_records FROM qf_info(''rls_qf'')', false),
(32, 'bloom_info', 'SELECT items FROM bloom_info(''rls_bloom'')', false),
(33, 'lert_info', 'SELECT reports FROM lert_info(''rls_lert'')', false),
(34, 'cbt_info', 'SELECT rows FROM cbt_info(''rls_cbt'')', false),
(35, 'bfile_info', 'SELECT size FROM bfile_info(''rls_bfile'')', false),
(36, 'streamsketch_log_info', 'SELECT log_records >= 0 FROM streamsketch_log_info(''rls_bcms'')', false);
GRANT SELECT ON rls_calls TO PUBLIC;

-- The outcome of one call as the current role, rolled back (qf_merge
-- queues inserts): its value, or 'error SQLSTATE: message'.
CREATE FUNCTION pg_temp.outcome(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text;
	st text;
	msg text;
BEGIN
	BEGIN
		EXECUTE stmt INTO r;
		RAISE EXCEPTION USING ERRCODE = 'SSROL', MESSAGE = coalesce(r, 'null');
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
		IF st = 'SSROL' THEN
			RETURN msg;
		END IF;
		RETURN 'error ' || st || ': ' || msg;
	END;
END;
$$;

-- An ordinary role bound by the policies: SELECT shows the keys below 10;
-- every reading function refuses, the *_info functions answer.
SET ROLE regress_rls_reader;
SELECT id, fn, reads, pg_temp.outcome(stmt) FROM rls_calls ORDER BY id;
-- the error in full: what to do instead
SELECT bcms_estimate('rls_bcms', 15);
-- with row_security = off, SELECT and the functions raise the same error
SET row_security = off;
SELECT id, fn, pg_temp.outcome(stmt) FROM rls_calls WHERE id < 30 ORDER BY id;
RESET row_security;

-- The owner, whom the policies do not bind: every key, from every function.
SET ROLE regress_rls_owner;
SELECT id, fn, pg_temp.outcome(stmt) FROM rls_calls ORDER BY id;
-- also with row_security = off, as for SELECT
SET row_security = off;
SELECT id, fn, pg_temp.outcome(stmt) FROM rls_calls WHERE id < 30 ORDER BY id;
RESET row_security;

-- A BYPASSRLS role: every key.
SET ROLE regress_rls_bypass;
SELECT id, fn, pg_temp.outcome(stmt) FROM rls_calls WHERE id < 30 ORDER BY id;

-- FORCE ROW LEVEL SECURITY binds the owner too: refused, SELECT filtered.
SET ROLE regress_rls_owner;
DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['rls_bcms', 'rls_qf', 'rls_bloom', 'rls_lert',
							 'rls_cbt', 'rls_bfile'] LOOP
		EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
	END LOOP;
END;
$$;
SELECT id, fn, reads, pg_temp.outcome(stmt) FROM rls_calls ORDER BY id;
-- the owner's hint
SELECT * FROM bfile_window(NULL::rls_bfile, 0, 100);
-- with row_security = off, PostgreSQL's error for a forced owner
SET row_security = off;
SELECT id, fn, pg_temp.outcome(stmt) FROM rls_calls WHERE id IN (3, 20) ORDER BY id;
RESET row_security;
-- ... and a BYPASSRLS role still bypasses them
SET ROLE regress_rls_bypass;
SELECT id, fn, pg_temp.outcome(stmt) FROM rls_calls WHERE reads ORDER BY id;

-- Row security enabled without any policy denies everything to the
-- reader (SELECT returns nothing): the functions refuse as well.
SET ROLE regress_rls_owner;
DROP POLICY low ON rls_qf;
DROP POLICY low ON rls_bfile;
SET ROLE regress_rls_reader;
SELECT id, fn, pg_temp.outcome(stmt) FROM rls_calls WHERE id IN (3, 11, 12, 19, 20) ORDER BY id;

-- Without row security (the policies stay, disabled), the reader sees
-- every key, from SELECT and from every function.
SET ROLE regress_rls_owner;
DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['rls_bcms', 'rls_qf', 'rls_bloom', 'rls_lert',
							 'rls_cbt', 'rls_bfile'] LOOP
		EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t);
	END LOOP;
END;
$$;
SET ROLE regress_rls_reader;
SELECT id, fn, pg_temp.outcome(stmt) FROM rls_calls ORDER BY id;
RESET ROLE;

-- The functions that return a table's rows take the table as a NULL of its
-- row type, which is also their result type.  The table's name in quotes
-- (text), as a varchar or as a regclass is refused with a hint that names
-- the table.
SELECT * FROM bfile_window('rls_bfile', 0, 100);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM bfile_subsample('regress_rls.rls_bfile'::varchar, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM cbt_lookup('rls_cbt'::regclass, 15);
\echo :LAST_ERROR_SQLSTATE
-- a name that is no table: the hint says what to write
SELECT * FROM cbt_lookup('no_such_table', 15);
\echo :LAST_ERROR_SQLSTATE
-- an untyped NULL is text too
SELECT * FROM bfile_subsample(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
-- NULL::table still works, and the rows are of the table's type
SELECT pg_typeof(c), c.* FROM cbt_lookup(NULL::rls_cbt, 15) c;
SELECT pg_typeof(s), count(*) FROM bfile_subsample(NULL::regress_rls.rls_bfile, 5) s GROUP BY 1;
SELECT pg_typeof(w), count(*), min(k), max(k)
FROM bfile_window(NULL::rls_bfile, 4, 8) w GROUP BY 1;

DROP SCHEMA regress_rls CASCADE;
DROP ROLE regress_rls_owner;
DROP ROLE regress_rls_reader;
DROP ROLE regress_rls_bypass;
