-- Operators and functions planted in public by an ordinary role must never
-- run when a superuser uses the extension, whatever the superuser's
-- search_path, and ordinary roles must be able to drop what they own.
\set VERBOSITY terse
CREATE ROLE ss_mallory LOGIN;
GRANT CREATE ON SCHEMA public TO ss_mallory;
CREATE TABLE public.ss_trap_log (what text);
GRANT INSERT ON public.ss_trap_log TO ss_mallory;

SET ROLE ss_mallory;
-- Each trap records that it ran and tries to make its author a superuser
-- (which works only when a superuser runs it).
CREATE FUNCTION public.ss_trap(what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.ss_trap_log VALUES (what);
	BEGIN
		EXECUTE 'ALTER ROLE ss_mallory SUPERUSER';
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
END;
$$;
DO $$
DECLARE
	t record;
BEGIN
	-- comparison operators on argument types with no exact built-in match
	FOR t IN SELECT * FROM (VALUES
		('oid', 'regclass'), ('regclass', 'oid'), ('regclass', 'regclass'),
		('oid', 'oid'), ('text', 'text'), ('name', 'text'), ('text', 'name'),
		('int4', 'int8'), ('int8', 'int4'), ('int8', 'int8'),
		('regtype', 'oid'), ('oid', 'regtype'), ('regproc', 'oid'))
		AS v(l, r)
	LOOP
		EXECUTE format('CREATE FUNCTION public.ss_trap_eq(%1$s, %2$s) RETURNS bool
			LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.ss_trap(''=(%1$s,%2$s)'');
			RETURN true; END $f$', t.l, t.r);
		EXECUTE format('CREATE OPERATOR public.= (LEFTARG = %s, RIGHTARG = %s,
			FUNCTION = public.ss_trap_eq)', t.l, t.r);
		EXECUTE format('CREATE OPERATOR public.<> (LEFTARG = %s, RIGHTARG = %s,
			FUNCTION = public.ss_trap_eq)', t.l, t.r);
	END LOOP;
	-- functions an unqualified call could resolve to
	FOR t IN SELECT * FROM (VALUES
		('format', 'text, text'), ('format', 'text, regclass'),
		('quote_ident', 'name'), ('pg_event_trigger_dropped_objects', ''),
		('pg_event_trigger_ddl_commands', ''), ('current_schema', 'int'),
		('lower', 'name'), ('upper', 'name'), ('length', 'name'),
		('pg_get_userbyid', 'int8'), ('array_position', 'anyarray, anyelement'))
		AS v(f, a)
	LOOP
		EXECUTE format('CREATE FUNCTION public.%1$I(%2$s) RETURNS text
			LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.ss_trap(''%1$s(%2$s)'');
			RETURN NULL; END $f$', t.f, t.a);
	END LOOP;
END;
$$;
RESET ROLE;

-- The superuser uses every structure with public first in its search_path.
SET search_path = public, pg_catalog;
CREATE TABLE sec_bcms (k text) USING bcms;
CREATE TABLE sec_qf (k int) USING quotient_filter;
CREATE TABLE sec_cf (k int) USING cascade_filter;
CREATE TABLE sec_bqf (k int) USING buffered_quotient_filter;
CREATE TABLE sec_bloom (k int) USING bloom_filter;
SELECT bcms_create('sec_bcms2', 'int', epsilon => 0.01);
SELECT qf_create('sec_qf2', 'int');
SELECT bloom_create('sec_bloom2', 'int', capacity => 1000);
INSERT INTO sec_bcms VALUES ('a'), ('a');
INSERT INTO sec_qf VALUES (1), (2);
INSERT INTO sec_cf VALUES (1);
INSERT INTO sec_bqf VALUES (1);
INSERT INTO sec_bloom VALUES (1);
INSERT INTO sec_bcms2 VALUES (7);
SELECT bcms_estimate('sec_bcms', 'a'::text), qf_contains('sec_qf', 1),
	   qf_count('sec_cf', 1), bloom_contains('sec_bloom', 1);
SELECT qf_delete('sec_qf', 2);
SELECT bcms_flush('sec_bcms'), bloom_flush('sec_bloom');
SELECT bcms_merge('sec_bcms2', cms_agg(k, 0.01, 0.01)) FROM (VALUES (7)) v(k);
SELECT qf_merge('sec_qf2', 'sec_qf');
SELECT (bcms_info('sec_bcms')).items, (qf_info('sec_qf')).items,
	   (bloom_info('sec_bloom')).items;
TRUNCATE sec_bcms, sec_qf;
SELECT bcms_estimate('sec_bcms', 'a'::text), qf_contains('sec_qf', 1);
SECURITY LABEL FOR streamsketch ON TABLE sec_bcms IS
	'mode=plain epsilon=0.01 delta=0.1 width=272 depth=3 buffer_size_kb=0 conservative=off seed=1';
VACUUM FULL sec_cf;
VACUUM sec_qf;
ALTER TABLE sec_bqf OWNER TO ss_mallory;
DROP TABLE sec_bcms, sec_qf, sec_cf, sec_bqf, sec_bloom, sec_bcms2, sec_qf2,
	sec_bloom2;
RESET search_path;

-- Nothing planted ran, and its author is still an ordinary role.
SELECT count(*) AS traps_run FROM public.ss_trap_log;
SELECT rolsuper FROM pg_roles WHERE rolname = 'ss_mallory';

-- An ordinary role drops what it owns: tables, views, functions, temp tables.
SET ROLE ss_mallory;
CREATE TABLE m_heap (a int);
CREATE VIEW m_view AS SELECT 1 AS one;
CREATE TEMP TABLE m_temp (a int);
CREATE TABLE m_sketch (k int) USING bcms;
DROP TABLE m_heap, m_temp, m_sketch;
DROP VIEW m_view;
DROP FUNCTION public.ss_trap_eq(oid, oid) CASCADE;
RESET ROLE;

DROP OWNED BY ss_mallory CASCADE;
DROP TABLE public.ss_trap_log;
REVOKE CREATE ON SCHEMA public FROM ss_mallory;
DROP ROLE ss_mallory;
