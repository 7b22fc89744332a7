--
-- Guard rails: the statements that would silently empty a structure or
-- change what inserting into it means are refused with SQLSTATE 0A000 by
-- the extension's event triggers (and UPDATE/DELETE/MERGE by the executor
-- hook), in a session where the library is not loaded yet as well as in
-- one where it is, on the structure itself and through a partitioned or
-- inheritance parent or a composite type; what pg_dump, pg_restore and
-- pg_upgrade emit, and ordinary maintenance, keeps working.
--
SET client_min_messages = error;	-- no "wal_level is insufficient" warnings
SET streamsketch.bcms_epsilon = 0.01;
SET streamsketch.bcms_buffer_size = 0;
SET streamsketch.qf_capacity = 1000;
SET streamsketch.qf_buffer_size = '8kB';
SET streamsketch.bloom_capacity = 1000;
SET streamsketch.bloom_buffer_size = 0;
-- these settings are the database's, so that every fresh session uses them
DO $$
BEGIN
	EXECUTE format('ALTER DATABASE %I SET client_min_messages = error', current_database());
END $$;

CREATE FUNCTION guard_trg() RETURNS trigger LANGUAGE plpgsql
AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE guard_ref (k text PRIMARY KEY);
CREATE PUBLICATION guard_pub;

-- For each access method: g_<am> (k text), a partition gpc_<am> of the
-- partitioned table gp_<am>, an inheritance child gic_<am> of the heap
-- gi_<am>, a table gtc_<am> OF the composite type gt_<am>, a structure in
-- schema gs_<am>, and a heap gh_<am>; three 'a's inserted into each.
CREATE FUNCTION guard_setup(am text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE g_%1$s (k text) USING %1$s', am);
	EXECUTE format('CREATE TABLE gp_%1$s (k text) PARTITION BY LIST (k)', am);
	EXECUTE format('CREATE TABLE gpc_%1$s PARTITION OF gp_%1$s FOR VALUES IN (''a'') USING %1$s', am);
	EXECUTE format('CREATE TABLE gi_%1$s (k text)', am);
	EXECUTE format('CREATE TABLE gic_%1$s () INHERITS (gi_%1$s) USING %1$s', am);
	EXECUTE format('CREATE TYPE gt_%1$s AS (k text)', am);
	EXECUTE format('CREATE TABLE gtc_%1$s OF gt_%1$s USING %1$s', am);
	EXECUTE format('CREATE SCHEMA gs_%1$s', am);
	EXECUTE format('CREATE TABLE gs_%1$s.s (k text) USING %1$s', am);
	EXECUTE format('CREATE TABLE gh_%1$s (k text)', am);
	FOR i IN 1..3 LOOP
		EXECUTE format('INSERT INTO g_%1$s VALUES (''a'');
						INSERT INTO gp_%1$s VALUES (''a'');
						INSERT INTO gic_%1$s VALUES (''a'');
						INSERT INTO gtc_%1$s VALUES (''a'');
						INSERT INTO gh_%1$s VALUES (''a'')', am);
	END LOOP;
END $$;

-- What the structures of am hold: the estimate, count or membership of 'a'
-- in g_, gpc_, gic_ and gtc_, then the heap's row count.
CREATE FUNCTION guard_contents(am text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text := '';
	t text;
	v text;
BEGIN
	FOREACH t IN ARRAY ARRAY['g', 'gpc', 'gic', 'gtc'] LOOP
		EXECUTE format(CASE am
						   WHEN 'bcms' THEN 'SELECT bcms_estimate(%L, ''a''::text)::text'
						   WHEN 'bloom_filter' THEN 'SELECT bloom_contains(%L, ''a''::text)::text'
						   ELSE 'SELECT qf_count(%L, ''a''::text)::text' END,
					   t || '_' || am) INTO v;
		r := r || v || ' ';
	END LOOP;
	EXECUTE format('SELECT count(*) FROM gh_%s', am) INTO v;
	RETURN r || 'heap ' || v;
END $$;

CREATE TABLE guard_stmts (n serial PRIMARY KEY, stmt text NOT NULL);

-- Run statement n ('@' stands for the access method) and report: whether
-- the library was loaded before it, the statement, its SQLSTATE and
-- message, and the contents afterwards.  The library-loaded check comes
-- first and touches no structure.
CREATE FUNCTION guard_run(n int, am text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	loaded bool := EXISTS (SELECT FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon');
	s text := replace((SELECT stmt FROM guard_stmts g WHERE g.n = guard_run.n), '@', am);
	res text;
BEGIN
	BEGIN
		EXECUTE s;
		res := 'ACCEPTED';
	EXCEPTION WHEN OTHERS THEN
		res := SQLSTATE || ' ' || SQLERRM;
	END;
	RETURN format('%s | %s | %s | %s',
				  CASE WHEN loaded THEN 'loaded' ELSE 'not loaded' END,
				  s, res, guard_contents(am));
END $$;

SELECT guard_setup(am) FROM unnest(ARRAY['bcms', 'quotient_filter',
	'buffered_quotient_filter', 'cascade_filter', 'bloom_filter']) am;
SELECT guard_contents('bcms');

-- A materialized view using a structure's access method can no longer be
-- created; make one with the guard disabled to show that REFRESH is refused.
ALTER EVENT TRIGGER streamsketch_guard_start DISABLE;
ALTER EVENT TRIGGER streamsketch_guard_end DISABLE;
SELECT format('CREATE MATERIALIZED VIEW gmv_%1$s USING %1$s AS SELECT ''a''::text AS k', am)
FROM unnest(ARRAY['bcms', 'quotient_filter', 'buffered_quotient_filter',
	'cascade_filter', 'bloom_filter']) am \gexec
ALTER EVENT TRIGGER streamsketch_guard_start ENABLE ALWAYS;
ALTER EVENT TRIGGER streamsketch_guard_end ENABLE ALWAYS;

-- The refused statements, as rows of guard_stmts; guard_run(n, am) runs
-- statement n on the structures of access method am.
INSERT INTO guard_stmts (stmt) VALUES
	('ALTER TABLE g_@ ALTER COLUMN k TYPE varchar(10)'),
	('ALTER TABLE g_@ ALTER COLUMN k TYPE varchar'),
	('ALTER TABLE g_@ ADD COLUMN x int'),
	('ALTER TABLE g_@ ADD COLUMN x float8 DEFAULT random()'),
	('ALTER TABLE g_@ DROP COLUMN k'),
	('ALTER TABLE g_@ SET UNLOGGED'),
	('ALTER TABLE g_@ SET ACCESS METHOD heap'),
	('ALTER TABLE gh_@ SET ACCESS METHOD @'),
	('CREATE TRIGGER gtrg BEFORE INSERT ON g_@ FOR EACH ROW EXECUTE FUNCTION guard_trg()'),
	('CREATE RULE "_RETURN" AS ON SELECT TO g_@ DO INSTEAD SELECT ''x''::text AS k'),
	('CREATE RULE grule AS ON INSERT TO g_@ DO INSTEAD NOTHING'),
	('ALTER TABLE g_@ ADD CONSTRAINT gchk CHECK (k <> '''')'),
	('ALTER TABLE g_@ ADD PRIMARY KEY (k)'),
	('ALTER TABLE g_@ ADD UNIQUE (k)'),
	('ALTER TABLE g_@ ADD EXCLUDE (k WITH =)'),
	('ALTER TABLE g_@ ADD FOREIGN KEY (k) REFERENCES guard_ref (k)'),
	('CREATE INDEX ON g_@ (k)'),
	('CREATE PUBLICATION gpub FOR TABLE g_@'),
	('ALTER PUBLICATION guard_pub ADD TABLE g_@'),
	('CREATE PUBLICATION gpub FOR TABLES IN SCHEMA gs_@'),
	('CREATE MATERIALIZED VIEW gmv USING @ AS SELECT ''a''::text AS k'),
	('REFRESH MATERIALIZED VIEW gmv_@'),
	('UPDATE g_@ SET k = ''b'''),
	('DELETE FROM g_@'),
	('MERGE INTO g_@ t USING (VALUES (''a'')) v(k) ON t.k = v.k WHEN MATCHED THEN DELETE'),
	('ALTER TABLE gi_@ ALTER COLUMN k TYPE varchar(10)'),
	('ALTER TABLE gi_@ ALTER COLUMN k TYPE varchar'),
	('ALTER TABLE gi_@ ADD COLUMN x int'),
	('ALTER TABLE gi_@ ADD COLUMN x float8 DEFAULT random()'),
	('ALTER TABLE gi_@ DROP COLUMN k'),
	('ALTER TABLE gi_@ ADD CONSTRAINT gchk CHECK (k <> '''')'),
	('CREATE PUBLICATION gpub FOR TABLE gi_@'),
	('DELETE FROM gi_@'),
	('ALTER TABLE gp_@ ADD COLUMN x int'),
	('ALTER TABLE gp_@ ADD COLUMN x float8 DEFAULT random()'),
	('ALTER TABLE gp_@ ADD CONSTRAINT gchk CHECK (k <> '''')'),
	('ALTER TABLE gp_@ ADD PRIMARY KEY (k)'),
	('CREATE INDEX ON gp_@ (k)'),
	('CREATE TRIGGER gtrg AFTER INSERT ON gp_@ FOR EACH ROW EXECUTE FUNCTION guard_trg()'),
	('CREATE PUBLICATION gpub FOR TABLE gp_@'),
	('UPDATE gp_@ SET k = ''a'''),
	('ALTER TYPE gt_@ ALTER ATTRIBUTE k TYPE varchar(10) CASCADE'),
	('ALTER TYPE gt_@ ALTER ATTRIBUTE k TYPE varchar CASCADE'),
	('ALTER TYPE gt_@ ADD ATTRIBUTE x int CASCADE'),
	('ALTER TYPE gt_@ DROP ATTRIBUTE k CASCADE');

-- 1. Every refused statement on every access method, each in a fresh
-- session (\c) in which the library is not loaded yet: the first column
-- says so, the statement is the first thing the session does with a
-- structure, and the last columns show that every structure still
-- holds its three 'a's (estimates 3, counts 3, Bloom true) and the heap
-- its 3 rows.
\t on
\c
SELECT guard_run(1, 'bcms');
\c
SELECT guard_run(2, 'bcms');
\c
SELECT guard_run(3, 'bcms');
\c
SELECT guard_run(4, 'bcms');
\c
SELECT guard_run(5, 'bcms');
\c
SELECT guard_run(6, 'bcms');
\c
SELECT guard_run(7, 'bcms');
\c
SELECT guard_run(8, 'bcms');
\c
SELECT guard_run(9, 'bcms');
\c
SELECT guard_run(10, 'bcms');
\c
SELECT guard_run(11, 'bcms');
\c
SELECT guard_run(12, 'bcms');
\c
SELECT guard_run(13, 'bcms');
\c
SELECT guard_run(14, 'bcms');
\c
SELECT guard_run(15, 'bcms');
\c
SELECT guard_run(16, 'bcms');
\c
SELECT guard_run(17, 'bcms');
\c
SELECT guard_run(18, 'bcms');
\c
SELECT guard_run(19, 'bcms');
\c
SELECT guard_run(20, 'bcms');
\c
SELECT guard_run(21, 'bcms');
\c
SELECT guard_run(22, 'bcms');
\c
SELECT guard_run(23, 'bcms');
\c
SELECT guard_run(24, 'bcms');
\c
SELECT guard_run(25, 'bcms');
\c
SELECT guard_run(26, 'bcms');
\c
SELECT guard_run(27, 'bcms');
\c
SELECT guard_run(28, 'bcms');
\c
SELECT guard_run(29, 'bcms');
\c
SELECT guard_run(30, 'bcms');
\c
SELECT guard_run(31, 'bcms');
\c
SELECT guard_run(32, 'bcms');
\c
SELECT guard_run(33, 'bcms');
\c
SELECT guard_run(34, 'bcms');
\c
SELECT guard_run(35, 'bcms');
\c
SELECT guard_run(36, 'bcms');
\c
SELECT guard_run(37, 'bcms');
\c
SELECT guard_run(38, 'bcms');
\c
SELECT guard_run(39, 'bcms');
\c
SELECT guard_run(40, 'bcms');
\c
SELECT guard_run(41, 'bcms');
\c
SELECT guard_run(42, 'bcms');
\c
SELECT guard_run(43, 'bcms');
\c
SELECT guard_run(44, 'bcms');
\c
SELECT guard_run(45, 'bcms');
\c
SELECT guard_run(1, 'quotient_filter');
\c
SELECT guard_run(2, 'quotient_filter');
\c
SELECT guard_run(3, 'quotient_filter');
\c
SELECT guard_run(4, 'quotient_filter');
\c
SELECT guard_run(5, 'quotient_filter');
\c
SELECT guard_run(6, 'quotient_filter');
\c
SELECT guard_run(7, 'quotient_filter');
\c
SELECT guard_run(8, 'quotient_filter');
\c
SELECT guard_run(9, 'quotient_filter');
\c
SELECT guard_run(10, 'quotient_filter');
\c
SELECT guard_run(11, 'quotient_filter');
\c
SELECT guard_run(12, 'quotient_filter');
\c
SELECT guard_run(13, 'quotient_filter');
\c
SELECT guard_run(14, 'quotient_filter');
\c
SELECT guard_run(15, 'quotient_filter');
\c
SELECT guard_run(16, 'quotient_filter');
\c
SELECT guard_run(17, 'quotient_filter');
\c
SELECT guard_run(18, 'quotient_filter');
\c
SELECT guard_run(19, 'quotient_filter');
\c
SELECT guard_run(20, 'quotient_filter');
\c
SELECT guard_run(21, 'quotient_filter');
\c
SELECT guard_run(22, 'quotient_filter');
\c
SELECT guard_run(23, 'quotient_filter');
\c
SELECT guard_run(24, 'quotient_filter');
\c
SELECT guard_run(25, 'quotient_filter');
\c
SELECT guard_run(26, 'quotient_filter');
\c
SELECT guard_run(27, 'quotient_filter');
\c
SELECT guard_run(28, 'quotient_filter');
\c
SELECT guard_run(29, 'quotient_filter');
\c
SELECT guard_run(30, 'quotient_filter');
\c
SELECT guard_run(31, 'quotient_filter');
\c
SELECT guard_run(32, 'quotient_filter');
\c
SELECT guard_run(33, 'quotient_filter');
\c
SELECT guard_run(34, 'quotient_filter');
\c
SELECT guard_run(35, 'quotient_filter');
\c
SELECT guard_run(36, 'quotient_filter');
\c
SELECT guard_run(37, 'quotient_filter');
\c
SELECT guard_run(38, 'quotient_filter');
\c
SELECT guard_run(39, 'quotient_filter');
\c
SELECT guard_run(40, 'quotient_filter');
\c
SELECT guard_run(41, 'quotient_filter');
\c
SELECT guard_run(42, 'quotient_filter');
\c
SELECT guard_run(43, 'quotient_filter');
\c
SELECT guard_run(44, 'quotient_filter');
\c
SELECT guard_run(45, 'quotient_filter');
\c
SELECT guard_run(1, 'buffered_quotient_filter');
\c
SELECT guard_run(2, 'buffered_quotient_filter');
\c
SELECT guard_run(3, 'buffered_quotient_filter');
\c
SELECT guard_run(4, 'buffered_quotient_filter');
\c
SELECT guard_run(5, 'buffered_quotient_filter');
\c
SELECT guard_run(6, 'buffered_quotient_filter');
\c
SELECT guard_run(7, 'buffered_quotient_filter');
\c
SELECT guard_run(8, 'buffered_quotient_filter');
\c
SELECT guard_run(9, 'buffered_quotient_filter');
\c
SELECT guard_run(10, 'buffered_quotient_filter');
\c
SELECT guard_run(11, 'buffered_quotient_filter');
\c
SELECT guard_run(12, 'buffered_quotient_filter');
\c
SELECT guard_run(13, 'buffered_quotient_filter');
\c
SELECT guard_run(14, 'buffered_quotient_filter');
\c
SELECT guard_run(15, 'buffered_quotient_filter');
\c
SELECT guard_run(16, 'buffered_quotient_filter');
\c
SELECT guard_run(17, 'buffered_quotient_filter');
\c
SELECT guard_run(18, 'buffered_quotient_filter');
\c
SELECT guard_run(19, 'buffered_quotient_filter');
\c
SELECT guard_run(20, 'buffered_quotient_filter');
\c
SELECT guard_run(21, 'buffered_quotient_filter');
\c
SELECT guard_run(22, 'buffered_quotient_filter');
\c
SELECT guard_run(23, 'buffered_quotient_filter');
\c
SELECT guard_run(24, 'buffered_quotient_filter');
\c
SELECT guard_run(25, 'buffered_quotient_filter');
\c
SELECT guard_run(26, 'buffered_quotient_filter');
\c
SELECT guard_run(27, 'buffered_quotient_filter');
\c
SELECT guard_run(28, 'buffered_quotient_filter');
\c
SELECT guard_run(29, 'buffered_quotient_filter');
\c
SELECT guard_run(30, 'buffered_quotient_filter');
\c
SELECT guard_run(31, 'buffered_quotient_filter');
\c
SELECT guard_run(32, 'buffered_quotient_filter');
\c
SELECT guard_run(33, 'buffered_quotient_filter');
\c
SELECT guard_run(34, 'buffered_quotient_filter');
\c
SELECT guard_run(35, 'buffered_quotient_filter');
\c
SELECT guard_run(36, 'buffered_quotient_filter');
\c
SELECT guard_run(37, 'buffered_quotient_filter');
\c
SELECT guard_run(38, 'buffered_quotient_filter');
\c
SELECT guard_run(39, 'buffered_quotient_filter');
\c
SELECT guard_run(40, 'buffered_quotient_filter');
\c
SELECT guard_run(41, 'buffered_quotient_filter');
\c
SELECT guard_run(42, 'buffered_quotient_filter');
\c
SELECT guard_run(43, 'buffered_quotient_filter');
\c
SELECT guard_run(44, 'buffered_quotient_filter');
\c
SELECT guard_run(45, 'buffered_quotient_filter');
\c
SELECT guard_run(1, 'cascade_filter');
\c
SELECT guard_run(2, 'cascade_filter');
\c
SELECT guard_run(3, 'cascade_filter');
\c
SELECT guard_run(4, 'cascade_filter');
\c
SELECT guard_run(5, 'cascade_filter');
\c
SELECT guard_run(6, 'cascade_filter');
\c
SELECT guard_run(7, 'cascade_filter');
\c
SELECT guard_run(8, 'cascade_filter');
\c
SELECT guard_run(9, 'cascade_filter');
\c
SELECT guard_run(10, 'cascade_filter');
\c
SELECT guard_run(11, 'cascade_filter');
\c
SELECT guard_run(12, 'cascade_filter');
\c
SELECT guard_run(13, 'cascade_filter');
\c
SELECT guard_run(14, 'cascade_filter');
\c
SELECT guard_run(15, 'cascade_filter');
\c
SELECT guard_run(16, 'cascade_filter');
\c
SELECT guard_run(17, 'cascade_filter');
\c
SELECT guard_run(18, 'cascade_filter');
\c
SELECT guard_run(19, 'cascade_filter');
\c
SELECT guard_run(20, 'cascade_filter');
\c
SELECT guard_run(21, 'cascade_filter');
\c
SELECT guard_run(22, 'cascade_filter');
\c
SELECT guard_run(23, 'cascade_filter');
\c
SELECT guard_run(24, 'cascade_filter');
\c
SELECT guard_run(25, 'cascade_filter');
\c
SELECT guard_run(26, 'cascade_filter');
\c
SELECT guard_run(27, 'cascade_filter');
\c
SELECT guard_run(28, 'cascade_filter');
\c
SELECT guard_run(29, 'cascade_filter');
\c
SELECT guard_run(30, 'cascade_filter');
\c
SELECT guard_run(31, 'cascade_filter');
\c
SELECT guard_run(32, 'cascade_filter');
\c
SELECT guard_run(33, 'cascade_filter');
\c
SELECT guard_run(34, 'cascade_filter');
\c
SELECT guard_run(35, 'cascade_filter');
\c
SELECT guard_run(36, 'cascade_filter');
\c
SELECT guard_run(37, 'cascade_filter');
\c
SELECT guard_run(38, 'cascade_filter');
\c
SELECT guard_run(39, 'cascade_filter');
\c
SELECT guard_run(40, 'cascade_filter');
\c
SELECT guard_run(41, 'cascade_filter');
\c
SELECT guard_run(42, 'cascade_filter');
\c
SELECT guard_run(43, 'cascade_filter');
\c
SELECT guard_run(44, 'cascade_filter');
\c
SELECT guard_run(45, 'cascade_filter');
\c
SELECT guard_run(1, 'bloom_filter');
\c
SELECT guard_run(2, 'bloom_filter');
\c
SELECT guard_run(3, 'bloom_filter');
\c
SELECT guard_run(4, 'bloom_filter');
\c
SELECT guard_run(5, 'bloom_filter');
\c
SELECT guard_run(6, 'bloom_filter');
\c
SELECT guard_run(7, 'bloom_filter');
\c
SELECT guard_run(8, 'bloom_filter');
\c
SELECT guard_run(9, 'bloom_filter');
\c
SELECT guard_run(10, 'bloom_filter');
\c
SELECT guard_run(11, 'bloom_filter');
\c
SELECT guard_run(12, 'bloom_filter');
\c
SELECT guard_run(13, 'bloom_filter');
\c
SELECT guard_run(14, 'bloom_filter');
\c
SELECT guard_run(15, 'bloom_filter');
\c
SELECT guard_run(16, 'bloom_filter');
\c
SELECT guard_run(17, 'bloom_filter');
\c
SELECT guard_run(18, 'bloom_filter');
\c
SELECT guard_run(19, 'bloom_filter');
\c
SELECT guard_run(20, 'bloom_filter');
\c
SELECT guard_run(21, 'bloom_filter');
\c
SELECT guard_run(22, 'bloom_filter');
\c
SELECT guard_run(23, 'bloom_filter');
\c
SELECT guard_run(24, 'bloom_filter');
\c
SELECT guard_run(25, 'bloom_filter');
\c
SELECT guard_run(26, 'bloom_filter');
\c
SELECT guard_run(27, 'bloom_filter');
\c
SELECT guard_run(28, 'bloom_filter');
\c
SELECT guard_run(29, 'bloom_filter');
\c
SELECT guard_run(30, 'bloom_filter');
\c
SELECT guard_run(31, 'bloom_filter');
\c
SELECT guard_run(32, 'bloom_filter');
\c
SELECT guard_run(33, 'bloom_filter');
\c
SELECT guard_run(34, 'bloom_filter');
\c
SELECT guard_run(35, 'bloom_filter');
\c
SELECT guard_run(36, 'bloom_filter');
\c
SELECT guard_run(37, 'bloom_filter');
\c
SELECT guard_run(38, 'bloom_filter');
\c
SELECT guard_run(39, 'bloom_filter');
\c
SELECT guard_run(40, 'bloom_filter');
\c
SELECT guard_run(41, 'bloom_filter');
\c
SELECT guard_run(42, 'bloom_filter');
\c
SELECT guard_run(43, 'bloom_filter');
\c
SELECT guard_run(44, 'bloom_filter');
\c
SELECT guard_run(45, 'bloom_filter');
\t off

-- 2. The same matrix in a session where the library is loaded.
\c
SELECT count(*) AS loaded FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon';
SELECT guard_contents('bcms');
SELECT count(*) AS loaded FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon';
\t on
SELECT guard_run(n, am)
FROM unnest(ARRAY['bcms', 'quotient_filter', 'buffered_quotient_filter',
	'cascade_filter', 'bloom_filter']) WITH ORDINALITY a(am, o), guard_stmts
ORDER BY o, n;
\t off

-- 3. Top-level statements in a fresh session, with the whole message.
\c
SELECT count(*) AS loaded FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon';
ALTER TABLE gi_bcms ADD COLUMN x float8 DEFAULT random();
\c
ALTER TYPE gt_cascade_filter ALTER ATTRIBUTE k TYPE varchar(10) CASCADE;
\c
CREATE RULE "_RETURN" AS ON SELECT TO g_quotient_filter DO INSTEAD SELECT 'x'::text AS k;
\c
ALTER TABLE gh_bloom_filter SET ACCESS METHOD bloom_filter;
\c
CREATE PUBLICATION gpub FOR TABLE gp_buffered_quotient_filter;
\c
DELETE FROM gp_bcms;
\c
CREATE MATERIALIZED VIEW gmv USING bcms AS SELECT 'a'::text AS k;
\c
\set VERBOSITY sqlstate
ALTER TABLE g_bcms ADD COLUMN x int;
\set VERBOSITY default
SELECT guard_contents(am) FROM unnest(ARRAY['bcms', 'quotient_filter',
	'buffered_quotient_filter', 'cascade_filter', 'bloom_filter']) am;
SELECT relname, relkind, amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam
WHERE relname ~ '^(g|gpc|gic|gtc)_' ORDER BY relname;

-- 4. What keeps working, as an ordinary role on its own structures.
CREATE ROLE regress_guard_user;
GRANT CREATE ON SCHEMA public TO regress_guard_user;
GRANT USAGE, CREATE ON SCHEMA gs_bcms TO regress_guard_user;
-- (as long as the extension keeps parameter catalog tables, a creator
-- writes them)
DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['bcms_params', 'qf_params', 'bloom_params'] LOOP
		IF to_regclass(t) IS NOT NULL THEN
			EXECUTE format('GRANT SELECT, INSERT, DELETE ON %I TO regress_guard_user', t);
		END IF;
	END LOOP;
END $$;
SET ROLE regress_guard_user;
CREATE FUNCTION guard_ok(stmts text, am text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	s text := replace(stmts, '@', am);
BEGIN
	EXECUTE s;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
CREATE TABLE guard_ok_stmts (n serial, stmt text);
INSERT INTO guard_ok_stmts (stmt) VALUES
	('CREATE TABLE ga_@ (k text NOT NULL) USING @'),
	('ALTER TABLE ga_@ OWNER TO regress_guard_user'),
	('ALTER TABLE ga_@ SET TABLESPACE pg_default'),
	('ALTER TABLE ga_@ ALTER COLUMN k SET DEFAULT ''dflt'''),
	('ALTER TABLE ga_@ ALTER COLUMN k DROP DEFAULT'),
	('ALTER TABLE ga_@ ALTER COLUMN k DROP NOT NULL'),
	('ALTER TABLE ONLY ga_@ ALTER COLUMN k SET NOT NULL'),
	('ALTER TABLE ga_@ ALTER COLUMN k SET STATISTICS 100'),
	('ALTER TABLE ga_@ ALTER COLUMN k SET STORAGE external'),
	('ALTER TABLE ga_@ SET (autovacuum_enabled = false)'),
	('ALTER TABLE ga_@ REPLICA IDENTITY FULL'),
	('ALTER TABLE ga_@ ENABLE ROW LEVEL SECURITY'),
	('ALTER TABLE ga_@ DISABLE ROW LEVEL SECURITY'),
	('ALTER TABLE ga_@ RENAME TO ga2_@'),
	('ALTER TABLE ga2_@ RENAME TO ga_@'),
	('ALTER TABLE ga_@ RENAME COLUMN k TO key'),
	('ALTER TABLE ga_@ RENAME COLUMN key TO k'),
	('ALTER TABLE ga_@ SET SCHEMA gs_bcms'),
	('ALTER TABLE gs_bcms.ga_@ SET SCHEMA public'),
	('COMMENT ON TABLE ga_@ IS ''a guarded structure'''),
	('COMMENT ON COLUMN ga_@.k IS ''the key'''),
	('GRANT SELECT, INSERT ON ga_@ TO PUBLIC'),
	('REVOKE INSERT ON ga_@ FROM PUBLIC'),
	('ANALYZE ga_@'),
	-- partitions and inheritance children, as pg_dump emits them
	('CREATE TABLE gap_@ (k text) PARTITION BY LIST (k)'),
	('CREATE TABLE gap1_@ (k text) USING @'),
	('ALTER TABLE ONLY gap_@ ATTACH PARTITION gap1_@ FOR VALUES IN (''a'')'),
	('ALTER TABLE gap_@ ALTER COLUMN k SET DEFAULT ''a'''),
	('ALTER TABLE gap_@ DETACH PARTITION gap1_@'),
	('ALTER TABLE gap_@ ATTACH PARTITION gap1_@ FOR VALUES IN (''a'')'),
	('CREATE TABLE gap2_@ PARTITION OF gap_@ FOR VALUES IN (''b'') USING @'),
	('CREATE TABLE gai_@ (k text)'),
	('CREATE TABLE gaic_@ (k text) INHERITS (gai_@) USING @'),
	('ALTER TABLE gaic_@ NO INHERIT gai_@'),
	('ALTER TABLE gaic_@ INHERIT gai_@'),
	('ALTER TABLE gai_@ ALTER COLUMN k SET NOT NULL'),
	('ALTER TABLE ONLY gai_@ ADD CONSTRAINT gai_chk CHECK (k <> '''') NO INHERIT'),
	('CREATE TYPE gat_@ AS (k text)'),
	('CREATE TABLE gatc_@ OF gat_@ USING @'),
	('ALTER TABLE gatc_@ NOT OF'),
	('ALTER TABLE gatc_@ OF gat_@'),
	('ALTER TYPE gat_@ RENAME ATTRIBUTE k TO key CASCADE'),
	-- an identity column, as pg_dump emits it
	('CREATE TABLE gaid_@ (k bigint NOT NULL) USING @'),
	('ALTER TABLE gaid_@ ALTER COLUMN k ADD GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME gaid_@_k_seq START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1)'),
	('ALTER TABLE gaid_@ ALTER COLUMN k SET GENERATED BY DEFAULT'),
	('CREATE TABLE galike_@ (LIKE ga_@ INCLUDING ALL)');
SELECT am, string_agg(n || ' ' || r, ', ' ORDER BY n) FILTER (WHERE r <> 'ok') AS failures,
	   count(*) FILTER (WHERE r = 'ok') AS ok
FROM unnest(ARRAY['bcms', 'quotient_filter', 'buffered_quotient_filter',
	'cascade_filter', 'bloom_filter']) WITH ORDINALITY a(am, o),
	LATERAL (SELECT n, guard_ok(stmt, am) AS r FROM guard_ok_stmts ORDER BY n) x
GROUP BY am, o ORDER BY o;
-- inserts, in transactions of their own
SELECT format('INSERT INTO ga_%1$s VALUES (''a''), (''a''), (''a'')', am)
FROM unnest(ARRAY['bcms', 'quotient_filter', 'buffered_quotient_filter',
	'cascade_filter', 'bloom_filter']) am \gexec
INSERT INTO gaid_cascade_filter DEFAULT VALUES;
CREATE TABLE gactas_bcms USING bcms AS SELECT 'a'::text AS k FROM generate_series(1, 2);
SELECT bcms_estimate('gactas_bcms', 'a'::text) AS created_as;
DROP TABLE gactas_bcms;
-- the ordinary role is refused too, and its structures keep their contents
ALTER TABLE ga_bcms ADD COLUMN x int;
ALTER TABLE ga_bcms ALTER COLUMN k TYPE varchar(10);
CREATE TRIGGER gtrg BEFORE INSERT ON ga_cascade_filter FOR EACH ROW EXECUTE FUNCTION guard_trg();
VACUUM FULL ga_bcms;
VACUUM FULL ga_quotient_filter;
VACUUM FULL ga_buffered_quotient_filter;
VACUUM FULL ga_cascade_filter;
VACUUM FULL ga_bloom_filter;
SELECT bcms_estimate('ga_bcms', 'a'::text) AS bcms,
	   qf_count('ga_quotient_filter', 'a'::text) AS qf,
	   qf_count('ga_buffered_quotient_filter', 'a'::text) AS bqf,
	   qf_count('ga_cascade_filter', 'a'::text) AS cf,
	   bloom_contains('ga_bloom_filter', 'a'::text) AS bloom,
	   qf_count('gaid_cascade_filter', 1::bigint) AS identity_key;
INSERT INTO gap_bcms VALUES ('a'), ('b');
SELECT bcms_estimate('gap1_bcms', 'a'::text) AS partition_a,
	   bcms_estimate('gap2_bcms', 'b'::text) AS partition_b;
TRUNCATE ga_bcms, gap_bcms;
SELECT bcms_estimate('ga_bcms', 'a'::text) AS after_truncate;
SELECT obj_description('ga_bloom_filter'::regclass, 'pg_class') AS comment,
	   has_table_privilege('public', 'ga_bloom_filter', 'SELECT') AS public_select;
SELECT format('DROP TABLE %s CASCADE', string_agg(c.oid::regclass::text, ', ' ORDER BY relname))
FROM pg_class c WHERE relowner = 'regress_guard_user'::regrole AND relkind IN ('r', 'p')
  AND NOT relispartition AND c.oid NOT IN (SELECT inhrelid FROM pg_inherits)
\gexec
SELECT format('DROP TYPE %s', string_agg(t.oid::regtype::text, ', '))
FROM pg_type t WHERE typowner = 'regress_guard_user'::regrole AND typtype = 'c'
  AND typrelid IN (SELECT oid FROM pg_class WHERE relkind = 'c')
\gexec
SELECT count(*) AS left_over FROM pg_class WHERE relowner = 'regress_guard_user'::regrole;
DROP FUNCTION guard_ok(text, text);
RESET ROLE;

-- 5. A structure with a dropped column (as pg_upgrade recreates one that
-- had one) keeps working, and its maintenance is not refused.  (pg_upgrade
-- itself runs in binary-upgrade mode, which the guard lets through.)
ALTER EVENT TRIGGER streamsketch_guard_start DISABLE;
ALTER EVENT TRIGGER streamsketch_guard_end DISABLE;
ALTER EVENT TRIGGER streamsketch_guard_drop DISABLE;
CREATE TABLE gdrop (k text) USING cascade_filter;
ALTER TABLE gdrop ADD COLUMN junk int;
ALTER TABLE gdrop DROP COLUMN junk;
ALTER EVENT TRIGGER streamsketch_guard_start ENABLE ALWAYS;
ALTER EVENT TRIGGER streamsketch_guard_end ENABLE ALWAYS;
ALTER EVENT TRIGGER streamsketch_guard_drop ENABLE ALWAYS;
INSERT INTO gdrop VALUES ('a');
ALTER TABLE gdrop OWNER TO regress_guard_user;
ALTER TABLE gdrop ALTER COLUMN k SET NOT NULL;
COMMENT ON TABLE gdrop IS 'dropped column';
SELECT qf_count('gdrop', 'a'::text) AS count, count(*) FILTER (WHERE attisdropped) AS dropped
FROM pg_attribute WHERE attrelid = 'gdrop'::regclass AND attnum > 0;
\set VERBOSITY sqlstate
ALTER TABLE gdrop ADD COLUMN x int;
\set VERBOSITY default
DROP TABLE gdrop;

-- 6. FOR ALL TABLES publications are accepted (they carry no structure
-- change: generic WAL is not decoded).
CREATE PUBLICATION gpub_all FOR ALL TABLES;
DROP PUBLICATION gpub_all;

-- 7. The types a structure's columns use, and DML in WITH queries.  A key
-- is hashed by its binary form, which for a composite value holds every
-- attribute: changing the attributes of a composite type or of a table's
-- row type that a key uses (directly, through a domain, an array or a
-- nested composite type) would make what was counted unfindable.  DROP ...
-- CASCADE would drop a structure's key or weight column (of a dropped
-- domain, a generated column's function), or an attribute of a type a key
-- uses.  UPDATE and DELETE in a WITH query would silently do nothing.  Each
-- runs in a fresh session, reports its SQLSTATE and message, and then what
-- every structure answers (unchanged: 'a' inserted twice, weight 5 for
-- gk_dk_s, 3 = length('abc') for gk_gen_s, and the heap's row).
CREATE TYPE gk_ct AS (k text);
CREATE TABLE gk_rt (k text);
CREATE TYPE gk_inner AS (x text);
CREATE TYPE gk_outer AS (k text, i gk_inner);
CREATE DOMAIN gk_dom AS gk_outer;
CREATE TYPE gk_di AS (x int);
CREATE TYPE gk_dout AS (k text, i gk_di);
CREATE DOMAIN gk_dk AS text;
CREATE TYPE gk_unused AS (k text);
CREATE FUNCTION gk_len(text) RETURNS bigint LANGUAGE sql IMMUTABLE
AS 'SELECT length($1)';
CREATE TABLE gk_h (k text);
CREATE TABLE gk_ct_s (k gk_ct) USING bcms;
CREATE TABLE gk_rt_s (k gk_rt) USING quotient_filter;
CREATE TABLE gk_arr_s (k gk_outer[]) USING buffered_quotient_filter;
CREATE TABLE gk_dom_s (k gk_dom) USING cascade_filter;
CREATE TABLE gk_dout_s (k gk_dout) USING bloom_filter;
CREATE TABLE gk_dk_s (k gk_dk, w bigint) USING bcms;
CREATE TABLE gk_gen_s (k text, w bigint GENERATED ALWAYS AS (gk_len(k)) STORED) USING bcms;
INSERT INTO gk_ct_s VALUES (ROW('a')), (ROW('a'));
INSERT INTO gk_rt_s VALUES (ROW('a')), (ROW('a'));
INSERT INTO gk_arr_s VALUES (ARRAY[ROW('a', ROW('x'))::gk_outer]), (ARRAY[ROW('a', ROW('x'))::gk_outer]);
INSERT INTO gk_dom_s VALUES (ROW('a', ROW('x'))), (ROW('a', ROW('x')));
INSERT INTO gk_dout_s VALUES (ROW('a', ROW(1))), (ROW('a', ROW(1)));
INSERT INTO gk_dk_s VALUES ('a', 2), ('a', 3);
INSERT INTO gk_gen_s VALUES ('abc');
INSERT INTO gk_h VALUES ('a');
CREATE FUNCTION gk_contents() RETURNS text LANGUAGE sql AS $$
	SELECT concat_ws(' ',
		bcms_estimate('gk_ct_s', ROW('a')::gk_ct),
		qf_count('gk_rt_s', ROW('a')::gk_rt),
		qf_count('gk_arr_s', ARRAY[ROW('a', ROW('x'))::gk_outer]),
		qf_count('gk_dom_s', ROW('a', ROW('x'))::gk_dom),
		bloom_contains('gk_dout_s', ROW('a', ROW(1))::gk_dout),
		bcms_estimate('gk_dk_s', 'a'::gk_dk),
		bcms_estimate('gk_gen_s', 'abc'::text),
		'heap ' || (SELECT count(*) FROM gk_h))
$$;
CREATE FUNCTION gk_run(s text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	loaded bool := EXISTS (SELECT FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon');
	res text;
BEGIN
	BEGIN
		EXECUTE s;
		res := 'ACCEPTED';
	EXCEPTION WHEN OTHERS THEN
		res := SQLSTATE || ' ' || SQLERRM;
	END;
	RETURN format('%s | %s | %s | %s',
				  CASE WHEN loaded THEN 'loaded' ELSE 'not loaded' END,
				  s, res, gk_contents());
END $$;
SELECT gk_contents();
\t on
\c
SELECT gk_run('ALTER TYPE gk_ct ADD ATTRIBUTE w int');
\c
SELECT gk_run('ALTER TYPE gk_ct DROP ATTRIBUTE k');
\c
SELECT gk_run('ALTER TYPE gk_ct ALTER ATTRIBUTE k TYPE varchar');
\c
SELECT gk_run('ALTER TABLE gk_rt ADD COLUMN w int');
\c
SELECT gk_run('ALTER TABLE gk_rt DROP COLUMN k');
\c
SELECT gk_run('ALTER TABLE gk_rt ALTER COLUMN k TYPE varchar');
\c
SELECT gk_run('ALTER TYPE gk_inner ADD ATTRIBUTE y int');
\c
SELECT gk_run('ALTER TYPE gk_di DROP ATTRIBUTE x');
\c
SELECT gk_run('DROP DOMAIN gk_dk CASCADE');
\c
SELECT gk_run('DROP FUNCTION gk_len(text) CASCADE');
\c
SELECT gk_run('DROP TYPE gk_di CASCADE');
\c
SELECT gk_run('DROP TYPE gk_inner CASCADE');
\c
SELECT gk_run('WITH d AS (DELETE FROM gk_ct_s RETURNING *) SELECT count(*) FROM d');
\c
SELECT gk_run('WITH d AS (UPDATE gk_dk_s SET w = 0 RETURNING *) SELECT count(*) FROM d');
\c
SELECT gk_run('WITH d AS (INSERT INTO gk_ct_s VALUES (ROW(''b'')) RETURNING *) DELETE FROM gk_gen_s');
\c
SELECT gk_run('WITH d AS (DELETE FROM gk_gen_s RETURNING *) INSERT INTO gk_h SELECT k FROM d');
-- accepted: a type no structure uses, a change that keeps a row type's
-- attributes, INSERT in a WITH query, EXPLAIN of a DELETE in one
\c
SELECT gk_run('ALTER TYPE gk_unused ADD ATTRIBUTE w int');
\c
SELECT gk_run('ALTER TABLE gk_rt ALTER COLUMN k SET DEFAULT ''x''');
\c
SELECT gk_run('WITH d AS (INSERT INTO gk_ct_s VALUES (ROW(''b'')) RETURNING *) SELECT count(*) FROM d');
\c
SELECT gk_run('EXPLAIN WITH d AS (DELETE FROM gk_ct_s RETURNING *) SELECT count(*) FROM d');
\t off
-- the same DROP ... CASCADE is accepted once the structures are dropped
DROP TABLE gk_dk_s, gk_gen_s;
DROP DOMAIN gk_dk CASCADE;
DROP FUNCTION gk_len(text) CASCADE;
SELECT bcms_estimate('gk_ct_s', ROW('b')::gk_ct) AS inserted_in_with;
DROP TABLE gk_ct_s, gk_rt_s, gk_arr_s, gk_dom_s, gk_dout_s, gk_h;
DROP DOMAIN gk_dom;
DROP TYPE gk_ct, gk_outer, gk_inner, gk_dout, gk_di, gk_unused;
DROP TABLE gk_rt;
DROP FUNCTION gk_contents(), gk_run(text);

-- 8. SECURITY LABEL FOR streamsketch as the first statement of a fresh
-- session, before anything loaded the library: the guard's
-- ddl_command_start trigger loads it, which registers the label provider
-- before PostgreSQL looks it up.
CREATE TABLE gl_bcms (k text) USING bcms;
SELECT label AS gl_label FROM pg_seclabels
WHERE objoid = 'gl_bcms'::regclass AND provider = 'streamsketch' \gset
\c
SELECT count(*) AS loaded FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon';
SECURITY LABEL FOR streamsketch ON TABLE gl_bcms IS :'gl_label';
SELECT count(*) AS loaded FROM pg_settings WHERE name = 'streamsketch.bcms_epsilon';
SELECT label = :'gl_label' AS same_label FROM pg_seclabels
WHERE objoid = 'gl_bcms'::regclass AND provider = 'streamsketch';
DROP TABLE gl_bcms;

-- the guard triggers are part of the extension
SELECT evtname, evtevent, evtenabled FROM pg_event_trigger
WHERE evtname LIKE 'streamsketch_guard%' ORDER BY evtname;

-- clean up
DO $$
BEGIN
	EXECUTE format('ALTER DATABASE %I RESET client_min_messages', current_database());
END $$;
DROP PUBLICATION guard_pub;
SELECT format('DROP MATERIALIZED VIEW gmv_%1$s; DROP TABLE g_%1$s, gp_%1$s, gi_%1$s, gic_%1$s, gtc_%1$s, gh_%1$s; DROP TYPE gt_%1$s; DROP SCHEMA gs_%1$s CASCADE', am)
FROM unnest(ARRAY['bcms', 'quotient_filter', 'buffered_quotient_filter',
	'cascade_filter', 'bloom_filter']) am \gexec
DROP FUNCTION guard_setup(text), guard_contents(text), guard_run(int, text), guard_trg();
DROP TABLE guard_stmts, guard_ref;
REVOKE CREATE ON SCHEMA public FROM regress_guard_user;
DROP OWNED BY regress_guard_user;
DROP ROLE regress_guard_user;
