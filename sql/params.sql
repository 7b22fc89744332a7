-- Parameters: the metapage holds them from creation on; the table's
-- security label (provider streamsketch) is the copy pg_dump restores.
\set VERBOSITY default

-- A setting SET before the library is loaded is only checked when the
-- library loads; a rejected value makes creation fail instead of silently
-- falling back to the default.  \c starts a session that has not loaded it.
\c
SELECT count(*) AS loaded FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon';
SET streamsketch.bcms_epsilon = 0;
SET streamsketch.qf_capacity = 5000;
CREATE TABLE p_bad (k int) USING bcms;
-- (the library is loaded now, and SET validates; a valid SET or a RESET
-- replaces the rejected value)
SET streamsketch.bcms_epsilon = 0;
SET streamsketch.bcms_epsilon = 0.01;
CREATE TABLE p_bcms (k int) USING bcms;
CREATE TABLE p_qf (k int) USING quotient_filter;
SELECT mode, epsilon, width FROM bcms_info('p_bcms');
SELECT capacity FROM qf_info('p_qf');
RESET ALL;
SELECT objname, label FROM pg_seclabels
WHERE provider = 'streamsketch' AND objname LIKE 'p\_%' ORDER BY objname;

-- TRUNCATE keeps the parameters, whatever the settings say now
SET streamsketch.bcms_epsilon = 0.1;
INSERT INTO p_bcms VALUES (1);
TRUNCATE p_bcms;
SELECT epsilon, width, items FROM bcms_info('p_bcms');
BEGIN;
CREATE TABLE p_new (k int) USING bcms;
INSERT INTO p_new VALUES (1);
TRUNCATE p_new;		-- in-place truncation of a table created in this transaction
SELECT epsilon, width, items FROM bcms_info('p_new');
COMMIT;
RESET streamsketch.bcms_epsilon;

-- Setting the label of a structure never written to sets its parameters;
-- the label is validated like the constructors' arguments.
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=55 depth=3 buffer_size_kb=0 conservative=off seed=42';
SELECT mode, epsilon, delta, width, depth, seed FROM bcms_info('p_new');
INSERT INTO p_new VALUES (1), (1);
SELECT bcms_estimate('p_new', 1);
-- the same parameters are accepted, other ones refused once it holds data
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=55 depth=3 buffer_size_kb=0 conservative=off seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=56 depth=3 buffer_size_kb=0 conservative=off seed=42';
-- a rolled-back relabel changes nothing
TRUNCATE p_new;
BEGIN;
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=buffered epsilon=0.01 delta=0.01 width=272 depth=5 buffer_size_kb=64 conservative=on seed=1';
SELECT mode, width, conservative FROM bcms_info('p_new');
ROLLBACK;
SELECT mode, width, conservative FROM bcms_info('p_new');
SELECT label FROM pg_seclabels WHERE objname = 'p_new';
\set VERBOSITY sqlstate
SECURITY LABEL FOR streamsketch ON TABLE p_new IS 'mode=plain';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=55 depth=3 buffer_size_kb=0 conservative=off seed=42 extra=1';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 epsilon=0.05 delta=0.1 width=55 depth=3 buffer_size_kb=0 conservative=off seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=fast epsilon=0.05 delta=0.1 width=55 depth=3 buffer_size_kb=0 conservative=off seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=nan delta=0.1 width=55 depth=3 buffer_size_kb=0 conservative=off seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=0 depth=3 buffer_size_kb=0 conservative=off seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=55 depth=99 buffer_size_kb=0 conservative=off seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=55 depth=3 buffer_size_kb=-1 conservative=off seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=55 depth=3 buffer_size_kb=0 conservative=maybe seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS
	'mode=plain epsilon=0.05 delta=0.1 width=55 depth=3 buffer_size_kb=0 conservative=on seed=42';
SECURITY LABEL FOR streamsketch ON TABLE p_qf IS
	'capacity=0 fp_rate=0.001 fanout=4 buffer_pages=1024 seed=1';
SECURITY LABEL FOR streamsketch ON TABLE p_qf IS
	'capacity=1000 fp_rate=1e-30 fanout=4 buffer_pages=1024 seed=1';
SECURITY LABEL FOR streamsketch ON TABLE p_new IS NULL;
CREATE TABLE p_heap (a int);
SECURITY LABEL FOR streamsketch ON TABLE p_heap IS 'mode=plain';
SECURITY LABEL FOR streamsketch ON COLUMN p_new.k IS 'mode=plain';
\set VERBOSITY default
SELECT mode, epsilon, delta, width, depth, seed FROM bcms_info('p_new');

-- every structure's label round-trips: setting a table's own label is a no-op
INSERT INTO p_bcms VALUES (1);
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT objoid::regclass AS t, label FROM pg_seclabel
		WHERE provider = 'streamsketch' AND classoid = 'pg_class'::regclass
	LOOP
		EXECUTE format('SECURITY LABEL FOR streamsketch ON TABLE %s IS %L',
					   r.t, r.label);
	END LOOP;
END;
$$;
SELECT bcms_estimate('p_bcms', 1) AS p_bcms_after_relabel;
DROP TABLE p_bcms, p_qf, p_new, p_heap;
SELECT count(*) AS labels_left FROM pg_seclabels WHERE objname LIKE 'p\_%';

-- streamsketch.max_structure_size bounds what parameters may ask for (at
-- creation) and how far a structure is ever extended
SET streamsketch.max_structure_size = '1MB';
\set VERBOSITY sqlstate
SELECT bcms_create('p_big', 'int', epsilon => 1e-5);
SELECT bcms_create('p_big', 'int', epsilon => 1e-5, mode => 'plain');
SELECT qf_create('p_big', 'int', capacity => 100000000);
SELECT bloom_create('p_big', 'int', capacity => 10000000);
CREATE TABLE p_big (k int) USING bcms;	-- the default epsilon needs 1.1 MB
\set VERBOSITY default
SELECT bcms_create('p_big', 'int', epsilon => 1e-5);
RESET streamsketch.max_structure_size;
-- constructor arguments are bounded like the settings and labels
\set VERBOSITY default
SELECT bcms_create('p_big', 'int', buffer_size => '100GB');
SELECT qf_create('p_big', 'int', buffer_size => '1TB', access_method => 'cascade_filter');
SELECT qf_create('p_big', 'int', fanout => -2, access_method => 'cascade_filter');
SELECT bcms_create('p_big', 'int', epsilon => 1e-300);
SELECT bcms_create('nodb.public.p_big', 'int');
SELECT count(*) FROM pg_class WHERE relname = 'p_big';

-- inserts are counted like a heap's, for monitoring and for autovacuum's
-- insert threshold (autovacuum then runs the structure's VACUUM)
CREATE TABLE p_stats_b (k int) USING bcms;
CREATE TABLE p_stats_q (k int) USING cascade_filter;
CREATE TABLE p_stats_f (k int) USING bloom_filter;
INSERT INTO p_stats_b SELECT g FROM generate_series(1, 100) g;
COPY p_stats_q FROM PROGRAM 'seq 1 50';
INSERT INTO p_stats_f VALUES (1), (NULL);
SELECT pg_stat_force_next_flush();
SELECT relname, n_tup_ins FROM pg_stat_user_tables
WHERE relname LIKE 'p\_stats\__' ORDER BY relname;
DROP TABLE p_stats_b, p_stats_q, p_stats_f;

-- placeholders that hold no value when the library loads are not rejected:
-- a RESET, or a SET LOCAL of a transaction that has ended
\c
RESET streamsketch.bcms_epsilon;
BEGIN;
SET LOCAL streamsketch.qf_capacity = 'abc';
COMMIT;
SELECT count(*) AS loaded FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon';
CREATE TABLE p_reset_b (k int) USING bcms;
CREATE TABLE p_reset_q (k int) USING quotient_filter;
SELECT epsilon FROM bcms_info('p_reset_b');
SELECT capacity FROM qf_info('p_reset_q');
DROP TABLE p_reset_b, p_reset_q;

-- a structure's comment (\dt+) names its kind and parameters, set when it
-- gets them: at creation, and when a label gives a table never written new
-- ones
SELECT bcms_create('p_desc_b', 'int', epsilon => 0.001, delta => 0.05);
SELECT obj_description('p_desc_b'::regclass, 'pg_class');
SELECT cbt_create('p_desc_c', 'k int', 'count(*) AS n', fanout => 8);
SELECT obj_description('p_desc_c'::regclass, 'pg_class');
CREATE TABLE p_desc_q (k int) USING quotient_filter;
SELECT obj_description('p_desc_q'::regclass, 'pg_class') LIKE 'quotient_filter: capacity %' AS described;
SELECT format('SECURITY LABEL FOR streamsketch ON TABLE p_desc_q IS %L',
	replace(label, 'capacity=' || (SELECT capacity FROM qf_info('p_desc_q')), 'capacity=5000'))
FROM pg_seclabels WHERE objoid = 'p_desc_q'::regclass
\gexec
SELECT capacity FROM qf_info('p_desc_q');
SELECT obj_description('p_desc_q'::regclass, 'pg_class') LIKE 'quotient_filter: capacity 5000,%' AS follows_label;
DROP TABLE p_desc_b, p_desc_c, p_desc_q;
