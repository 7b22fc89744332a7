-- nulls: every SQL-callable function of the extension, called with NULL in
-- each argument position in turn, gives NULL or a clean error with a proper
-- SQLSTATE: never a crash, an internal error (XX000) or a silent effect.
-- The functions are enumerated from pg_depend, so a function added to the
-- extension without a line in null_calls below makes this test fail.
-- The same calls in named notation check that every argument has a name.
SET client_min_messages = warning;
LOAD 'streamsketch';

CREATE TABLE nt_bcms (k int) USING bcms;
CREATE TABLE nt_qf (k int) USING quotient_filter;
CREATE TABLE nt_qf2 (k int) USING quotient_filter;
CREATE TABLE nt_qft (k text) USING quotient_filter;
CREATE TABLE nt_qfts (k timestamptz) USING cascade_filter;
CREATE TABLE nt_bloom (k int) USING bloom_filter;
CREATE TABLE nt_lert (k int) USING lert;
INSERT INTO nt_bcms VALUES (0), (1);
INSERT INTO nt_qf VALUES (0), (1);
INSERT INTO nt_qft VALUES (''), ('a');
INSERT INTO nt_qfts VALUES ('2000-01-01 00:00:00+00');
INSERT INTO nt_bloom VALUES (0);
INSERT INTO nt_lert SELECT 0 FROM generate_series(1, 30);
SELECT cbt_create('nt_cbt', 'k int', 'count(*) AS n, sum(v::int) AS s') IS NOT NULL AS created;
SELECT bfile_create('nt_bfile', 'id int', sample_size => 100) IS NOT NULL AS created;
INSERT INTO nt_cbt (k, v) VALUES (0, 1), (0, 2), (1, 3);
CREATE TABLE nt_values AS
SELECT cms_agg(k, 0.0001::float8, 0.01::float8) AS c,
       qfilter_agg(k, 1000000::bigint, 0.001::float8) AS q
FROM generate_series(0, 9) k;

-- One valid call per function: SQL expressions for its arguments.
CREATE TABLE null_calls (fn regprocedure NOT NULL, args text[] NOT NULL);
INSERT INTO null_calls VALUES
('cms_in(cstring)', ARRAY['(SELECT c FROM nt_values)::text::cstring']),
('cms_out(cms)', ARRAY['(SELECT c FROM nt_values)']),
('cms_send(cms)', ARRAY['(SELECT c FROM nt_values)']),
('cms_estimate(cms,anycompatible)', ARRAY['(SELECT c FROM nt_values)', '1::int']),
('cms_union(cms,cms)', ARRAY['(SELECT c FROM nt_values)', '(SELECT c FROM nt_values)']),
('cms_info(cms)', ARRAY['(SELECT c FROM nt_values)']),
('cms_agg(anyelement,float8,float8)', ARRAY['1::int', '0.01::float8', '0.1::float8']),
('cms_agg(anyelement,bigint,float8,float8)', ARRAY['1::int', '2::bigint', '0.01::float8', '0.1::float8']),
('cms_union_agg(cms)', ARRAY['(SELECT c FROM nt_values)']),
('qfilter_in(cstring)', ARRAY['(SELECT q FROM nt_values)::text::cstring']),
('qfilter_out(qfilter)', ARRAY['(SELECT q FROM nt_values)']),
('qfilter_send(qfilter)', ARRAY['(SELECT q FROM nt_values)']),
('qfilter_contains(qfilter,anycompatible)', ARRAY['(SELECT q FROM nt_values)', '1::int']),
('qfilter_count(qfilter,anycompatible)', ARRAY['(SELECT q FROM nt_values)', '1::int']),
('qfilter_remove(qfilter,anycompatible)', ARRAY['(SELECT q FROM nt_values)', '1::int']),
('qfilter_remove(qfilter,anycompatible,bigint)', ARRAY['(SELECT q FROM nt_values)', '1::int', '1::bigint']),
('qfilter_union(qfilter,qfilter)', ARRAY['(SELECT q FROM nt_values)', '(SELECT q FROM nt_values)']),
('qfilter_resize(qfilter)', ARRAY['(SELECT q FROM nt_values)']),
('qfilter_info(qfilter)', ARRAY['(SELECT q FROM nt_values)']),
('qfilter_agg(anyelement,bigint,float8)', ARRAY['1::int', '1000::bigint', '0.01::float8']),
('qfilter_agg(anyelement,bigint,bigint,float8)', ARRAY['1::int', '2::bigint', '1000::bigint', '0.01::float8']),
('qfilter_union_agg(qfilter)', ARRAY['(SELECT q FROM nt_values)']),
('bcms_estimate(regclass,anycompatible)', ARRAY['''nt_bcms''::regclass', '0::int']),
('bcms_flush(regclass)', ARRAY['''nt_bcms''::regclass']),
('bcms_info(regclass)', ARRAY['''nt_bcms''::regclass']),
('bcms_merge(regclass,cms)', ARRAY['''nt_bcms''::regclass', '(SELECT c FROM nt_values)']),
('bcms_create(text,regtype,float8,float8,bigint,int,bool,text,bool,text,bool)',
 ARRAY['''nt_new''::text', '''int''::regtype', '0.01::float8', '0.1::float8',
       'NULL::bigint', 'NULL::int', 'false', '''buffered''::text', 'false',
       '''1MB''::text', 'false']),
('qf_contains(regclass,anycompatible)', ARRAY['''nt_qf''::regclass', '0::int']),
('qf_count(regclass,anycompatible)', ARRAY['''nt_qf''::regclass', '0::int']),
('qf_delete(regclass,anycompatible,bigint)', ARRAY['''nt_qf''::regclass', '0::int', '1::bigint']),
('qf_merge(regclass,regclass)', ARRAY['''nt_qf2''::regclass', '''nt_qf''::regclass']),
('qf_merge_value(regclass,qfilter)', ARRAY['''nt_qf''::regclass', '(SELECT q FROM nt_values)']),
('qf_resize(regclass)', ARRAY['''nt_qf2''::regclass']),
('qf_info(regclass)', ARRAY['''nt_qf''::regclass']),
('qf_flush(regclass)', ARRAY['''nt_qf''::regclass']),
('qf_create(text,regtype,bigint,float8,bool,bool,text,int,text)',
 ARRAY['''nt_new''::text', '''int''::regtype', '1000::bigint', '0.01::float8',
       'false', 'false', '''cascade_filter''::text', '4', '''64kB''::text']),
('bloom_contains(regclass,anycompatible)', ARRAY['''nt_bloom''::regclass', '0::int']),
('bloom_flush(regclass)', ARRAY['''nt_bloom''::regclass']),
('bloom_info(regclass)', ARRAY['''nt_bloom''::regclass']),
('bloom_create(text,regtype,bigint,float8,text,text,bool)',
 ARRAY['''nt_new''::text', '''int''::regtype', '1000::bigint', '0.01::float8',
       '''elevator''::text', '''64kB''::text', 'false']),
('lert_count(regclass,anycompatible)', ARRAY['''nt_lert''::regclass', '0::int']),
('lert_reported(regclass,anycompatible)', ARRAY['''nt_lert''::regclass', '0::int']),
('lert_counts(regclass,anyelement)', ARRAY['''nt_lert''::regclass', 'NULL::int']),
('lert_reports(regclass,bigint)', ARRAY['''nt_lert''::regclass', '0::bigint']),
('lert_flush(regclass)', ARRAY['''nt_lert''::regclass']),
('lert_info(regclass)', ARRAY['''nt_lert''::regclass']),
('streamsketch_log_info(regclass)', ARRAY['''nt_lert''::regclass']),
('streamsketch_log_state(oid)', ARRAY['''nt_lert''::regclass::oid']),
('streamsketch_background_queue()', ARRAY[]::text[]),
('streamsketch_background_stats()', ARRAY[]::text[]),
('streamsketch_progress()', ARRAY[]::text[]),
('cbt_info(regclass)', ARRAY['''nt_cbt''::regclass']),
('sample_agg(anyelement,int)', ARRAY['1', '3']),
('bfile_info(regclass)', ARRAY['''nt_bfile''::regclass']),
('bfile_subsample(anycompatible,bigint)', ARRAY['NULL::nt_bfile', '3::bigint']),
('bfile_window(anycompatible,"any","any")', ARRAY['NULL::nt_bfile', '0::bigint', '10::bigint']),
('bfile_flush(regclass)', ARRAY['''nt_bfile''::regclass']),
('bfile_create(text,text,"any",float8,int,text,text,text,bool)',
 ARRAY['''nt_bfile_new''::text', '''id int''::text', '100::bigint', '0.5::float8',
       '4', '''uniform''::text', 'NULL::text', 'NULL::text', 'false']),
('sample_agg(anyelement,int,float8)', ARRAY['1', '3', '1.0::float8']),
('cbt_lookup(anycompatible,"any")', ARRAY['NULL::nt_cbt', '0::int']),
('cbt_finalize(regclass)', ARRAY['''nt_cbt''::regclass']),
('cbt_create(text,text,text,text,text,int,bool,bool)',
 ARRAY['''nt_cbt_new''::text', '''k int''::text', '''count(*) AS n''::text',
       '''64kB''::text', '''16kB''::text', '4', 'true', 'false']),
('lert_create(text,regtype,bigint,text,int,int,text,int,text,bool)',
 ARRAY['''nt_new''::text', '''int''::regtype', '24::bigint', '''count_stretch''::text',
       '1', '4', '''64kB''::text', '1', '''alerts''::text', 'false']);

-- The extension's functions.  Those with an argument of type internal
-- (access method handlers, aggregate support, binary input) cannot be
-- called from SQL, nor can trigger functions.
CREATE VIEW ext_functions AS
SELECT p.oid::regprocedure AS fn, p.oid, p.proname, p.prokind,
       EXISTS (SELECT 1 FROM unnest(p.proargtypes::oid[]) t
               WHERE t = 'internal'::regtype)
       OR p.prorettype IN ('trigger'::regtype, 'event_trigger'::regtype)
       AS not_callable
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'streamsketch';

-- must be empty: callable functions this test does not call
SELECT fn AS untested_function FROM ext_functions
WHERE NOT not_callable AND fn NOT IN (SELECT fn FROM null_calls)
ORDER BY fn::text;
-- must be empty: lines of null_calls that are not functions of the extension
SELECT fn AS not_an_extension_function FROM null_calls
WHERE fn NOT IN (SELECT fn FROM ext_functions WHERE NOT not_callable);
-- the functions SQL cannot call
SELECT fn AS not_callable_from_sql FROM ext_functions WHERE not_callable
ORDER BY fn::text;

-- The outcome of one statement, which is rolled back: 'null', 'value' or
-- 'error SQLSTATE: message'.
CREATE FUNCTION pg_temp.outcome(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text;
	res text;
	st text;
	msg text;
BEGIN
	BEGIN
		EXECUTE stmt INTO r;
		res := CASE WHEN r IS NULL THEN 'null' ELSE 'value' END;
		-- undo whatever the call did (created a table, queued a delete)
		RAISE EXCEPTION USING ERRCODE = 'SSROL', MESSAGE = res;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
		IF st = 'SSROL' THEN
			RETURN msg;
		END IF;
		RETURN 'error ' || st || ': ' || msg;
	END;
END;
$$;

-- The call of fn with args, argument nullpos (1-based, 0: none) replaced
-- by a NULL of its type, in positional or named notation.
CREATE FUNCTION pg_temp.call_sql(fn regprocedure, args text[], nullpos int,
								 named bool) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	p pg_proc;
	a text[] := '{}';
	t text;
BEGIN
	SELECT * INTO p FROM pg_proc WHERE oid = fn;
	FOR i IN 1 .. coalesce(array_length(args, 1), 0) LOOP
		IF i = nullpos THEN
			EXECUTE format('SELECT pg_typeof(%s)::text', args[i]) INTO t;
			a := a || format('NULL::%s', t);
		ELSE
			a := a || args[i];
		END IF;
		IF named THEN
			a[i] := format('%I => %s', p.proargnames[i], a[i]);
		END IF;
	END LOOP;
	RETURN format('SELECT %I(%s)::text', p.proname, array_to_string(a, ', '));
END;
$$;

CREATE TABLE null_outcomes AS
SELECT c.fn, i AS null_arg, (SELECT proargnames[i] FROM pg_proc WHERE oid = c.fn) AS name,
       pg_temp.outcome(pg_temp.call_sql(c.fn, c.args, i, false)) AS outcome
FROM null_calls c, generate_series(1, array_length(c.args, 1)) i;

-- the outcomes, reviewed: NULL for STRICT functions; the constructors take
-- a NULL optional argument as its default but need a name and a key type;
-- the aggregates skip a NULL key or weight and need their parameters
SELECT fn, null_arg, name, outcome FROM null_outcomes ORDER BY fn::text, null_arg;

-- must be empty: internal errors, or a value where NULL or an error is due
-- (the first argument of cbt_lookup, bfile_subsample and bfile_window is
-- a NULL of the table's row type anyway, lert_counts' second a NULL of the
-- key type)
SELECT fn, null_arg, outcome FROM null_outcomes
WHERE outcome LIKE 'error XX%'
   OR (outcome = 'value' AND NOT (fn::text LIKE '%\_create(%' AND null_arg > 2)
       AND NOT (fn IN ('cbt_lookup(anycompatible,"any")'::regprocedure,
                       'bfile_subsample(anycompatible,bigint)'::regprocedure,
                       'bfile_window(anycompatible,"any","any")'::regprocedure)
                AND null_arg = 1)
       AND NOT (fn = 'lert_counts(regclass,anyelement)'::regprocedure
                AND null_arg = 2));

-- every valid call works, in positional and in named notation (aggregates
-- cannot be called in named notation, nor a VARIADIC argument without
-- VARIADIC: cbt.sql calls cbt_lookup so); must be empty
SELECT fn, pg_temp.outcome(pg_temp.call_sql(fn, args, 0, false)) AS positional,
       pg_temp.outcome(pg_temp.call_sql(fn, args, 0, true)) AS named
FROM null_calls c
WHERE pg_temp.outcome(pg_temp.call_sql(fn, args, 0, false)) LIKE 'error%'
   OR ((SELECT prokind FROM pg_proc WHERE oid = c.fn) = 'f' AND
       (SELECT provariadic FROM pg_proc WHERE oid = c.fn) = 0 AND
       pg_temp.outcome(pg_temp.call_sql(fn, args, 0, true)) LIKE 'error%');

-- must be empty: functions of the extension with an unnamed argument
SELECT fn AS unnamed_arguments FROM ext_functions f JOIN pg_proc p ON p.oid = f.oid
WHERE p.pronargs > 0
  AND (p.proargnames IS NULL OR '' = ANY (p.proargnames));

-- must be empty: SQL and PL/pgSQL functions without a pinned search_path
SELECT fn AS search_path_not_pinned FROM ext_functions f JOIN pg_proc p ON p.oid = f.oid
WHERE p.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('sql', 'plpgsql'))
  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false);

-- No silent effect: a NULL key deletes nothing (it deleted a copy of key 0,
-- of 2000-01-01 for timestamptz, and crashed the server for text).
SELECT qf_delete('nt_qf', NULL::int);
SELECT qf_delete('nt_qf', 0, NULL);
SELECT qf_delete('nt_qft', NULL::text);
SELECT qf_delete('nt_qfts', NULL::timestamptz);
SELECT qf_delete(NULL, 0);
SELECT qf_count('nt_qf', 0) AS key_0, qf_count('nt_qft', ''::text) AS empty_text,
       qf_count('nt_qfts', '2000-01-01 00:00:00+00'::timestamptz) AS y2000;
SELECT bcms_merge('nt_bcms', NULL);
SELECT qf_merge_value('nt_qf', NULL);
SELECT qf_merge('nt_qf', NULL), qf_merge(NULL, 'nt_qf');
SELECT bcms_estimate('nt_bcms', 0) AS bcms_0, qf_info('nt_qf') IS NOT NULL AS info,
       (SELECT total_count FROM qf_info('nt_qf')) AS qf_total;
SELECT qfilter_count(qfilter_remove(q, NULL::int), 0) IS NULL AS removed_nothing
FROM nt_values;

-- named notation as the README documents it
SELECT cms_estimate(sketch => c, key => 3) AS cms_3,
       qfilter_count(filter => qfilter_remove(filter => q, key => 3, count => 1), key => 3) AS qf_3,
       qfilter_contains(filter => q, key => 4) AS has_4,
       (cms_info(sketch => cms_union(a => c, b => c))).total AS union_total,
       (qfilter_info(filter => qfilter_resize(filter => qfilter_union(a => q, b => q)))).total
         AS union_total_q
FROM nt_values;
SELECT bcms_estimate(sketch => 'nt_bcms', key => 1) AS bcms_1,
       qf_count(filter => 'nt_qf', key => 1) AS qf_1,
       bloom_contains(filter => 'nt_bloom', key => 0) AS bloom_0;

-- a lert skips rows with a NULL key: 30 observations of 0 and none of NULL
INSERT INTO nt_lert VALUES (NULL), (NULL);
SELECT lert_count(lert => 'nt_lert', key => 0) AS lert_0, k AS reported FROM nt_lert;

DROP TABLE null_outcomes, null_calls, nt_values, nt_bcms, nt_qf, nt_qf2, nt_qft,
	nt_qfts, nt_bloom, nt_lert, nt_cbt, nt_bfile;
DROP VIEW ext_functions;
