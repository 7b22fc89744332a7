-- A cbt's definition is bound by object ids when it is created, like a
-- view's rule: what a session puts in pg_temp or public never runs, renames
-- follow (in every new session, in cbt_info and in the label a dump
-- restores), and definitions are checked as they are written.
-- (\echo :LAST_ERROR_SQLSTATE follows every statement that must fail.)
\set VERBOSITY terse
SELECT current_user AS superuser \gset
CREATE ROLE regress_cbtb_reader LOGIN;
CREATE TABLE public.cbtb_planted (who text, what text);
GRANT INSERT ON public.cbtb_planted TO PUBLIC;
-- a user type and functions in a schema of their own
CREATE SCHEMA cbtb_s;
CREATE TYPE cbtb_s.mood AS ENUM ('calm', 'angry');
CREATE FUNCTION cbtb_s.dbl(integer) RETURNS integer
	LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2';
CREATE AGGREGATE cbtb_s.total(integer) (sfunc = int4pl, stype = integer,
	combinefunc = int4pl, initcond = '0');
-- every type name a definition can carry: casts to text, date, inet, uuid,
-- jsonb and a user type, and keys of such types
SELECT cbt_create('cbtb_t', 'k text, m cbtb_s.mood',
	'max(v::integer::text) AS mx, min(d::date) AS md, max(i::inet) AS mi,
	 min(u::uuid::text) AS mu, count(j::jsonb) AS nj,
	 cbtb_s.total(cbtb_s.dbl(w::integer)) AS tw');
CREATE TABLE cbtb_ref (k text, m cbtb_s.mood, v integer, d date, i inet,
	u uuid, j jsonb, w integer);
INSERT INTO cbtb_ref
	SELECT 'k' || g % 3, 'calm', g, date '2020-01-01' + g,
		('10.0.0.' || g)::inet, md5(g::text)::uuid, jsonb_build_object('g', g), g
	FROM generate_series(1, 60) g;
INSERT INTO cbtb_t (k, m, v, d, i, u, j, w) SELECT * FROM cbtb_ref;
GRANT SELECT ON cbtb_t TO regress_cbtb_reader;
GRANT INSERT ON cbtb_t TO regress_cbtb_reader;
GRANT INSERT ON cbtb_ref TO regress_cbtb_reader;
CREATE VIEW cbtb_expected AS
	SELECT k, m, max(v::text) AS mx, min(d) AS md, max(i) AS mi,
		min(u::text) AS mu, count(j) AS nj, sum(w * 2)::integer AS tw
	FROM cbtb_ref GROUP BY k, m;
GRANT SELECT ON cbtb_expected TO regress_cbtb_reader;

-- A role with SELECT and INSERT, in a session where the library is not
-- loaded yet, shadows every type name in pg_temp with a domain whose check
-- logs and tries to make the role superuser, and plants public functions.
\c - regress_cbtb_reader
CREATE FUNCTION pg_temp.trap(x pg_catalog.text) RETURNS boolean
	LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.cbtb_planted VALUES (current_user, x);
	IF current_user <> session_user THEN
		EXECUTE format('ALTER ROLE %I SUPERUSER', session_user);
	END IF;
	RETURN true;
END $$;
CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (pg_temp.trap(VALUE));
CREATE DOMAIN pg_temp.date AS pg_catalog.date CHECK (pg_temp.trap(VALUE::pg_catalog.text));
CREATE DOMAIN pg_temp.inet AS pg_catalog.inet CHECK (pg_temp.trap(VALUE::pg_catalog.text));
CREATE DOMAIN pg_temp.uuid AS pg_catalog.uuid CHECK (pg_temp.trap(VALUE::pg_catalog.text));
CREATE DOMAIN pg_temp.jsonb AS pg_catalog.jsonb CHECK (pg_temp.trap(VALUE::pg_catalog.text));
CREATE DOMAIN pg_temp.int4 AS pg_catalog.int4 CHECK (pg_temp.trap(VALUE::pg_catalog.text));
SET search_path = pg_temp, public, pg_catalog;
SELECT count(*) AS groups, bool_and(c.mx = e.mx AND c.md = e.md AND c.mi = e.mi
		AND c.mu = e.mu AND c.nj = e.nj AND c.tw = e.tw) AS equal_group_by
	FROM public.cbtb_t c JOIN public.cbtb_expected e USING (k, m);
INSERT INTO public.cbtb_t (k, m, v, d, i, u, j, w)
	VALUES ('k1', 'angry', 7, '2030-01-01', '10.1.1.1', md5('x')::pg_catalog.uuid, '{}', 5);
INSERT INTO public.cbtb_ref
	VALUES ('k1', 'angry', 7, '2030-01-01', '10.1.1.1', md5('x')::pg_catalog.uuid, '{}', 5);
SELECT count(*) AS groups, bool_and(c.mx = e.mx AND c.md = e.md AND c.mi = e.mi
		AND c.mu = e.mu AND c.nj = e.nj AND c.tw = e.tw) AS equal_group_by
	FROM public.cbtb_t c JOIN public.cbtb_expected e USING (k, m);
SELECT tw FROM public.cbt_lookup(NULL::public.cbtb_t, 'k1', 'angry');
\c - :superuser
-- nothing planted ran, and the role is not superuser
SELECT count(*) AS planted_runs FROM cbtb_planted;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_cbtb_reader';

-- Renames follow: the table's columns, and the schema, aggregate, function
-- and type the definition names, then a new session.
ALTER TABLE cbtb_t RENAME COLUMN k TO key;
ALTER TABLE cbtb_t RENAME COLUMN tw TO twice;
ALTER TABLE cbtb_t RENAME COLUMN w TO weight;
ALTER SCHEMA cbtb_s RENAME TO cbtb_s2;
ALTER AGGREGATE cbtb_s2.total(integer) RENAME TO grand_total;
ALTER FUNCTION cbtb_s2.dbl(integer) RENAME TO doubled;
ALTER TYPE cbtb_s2.mood RENAME TO feeling;
-- what was renamed is planted again under its old name: it must not run
CREATE SCHEMA cbtb_s;
CREATE FUNCTION cbtb_s.dbl(integer) RETURNS integer LANGUAGE sql AS
	$$ INSERT INTO public.cbtb_planted VALUES (current_user, 'old name'); SELECT 0 $$;
\c -
INSERT INTO cbtb_t (key, m, v, d, i, u, j, weight)
	VALUES ('k2', 'angry', 1, '2031-01-01', '10.2.2.2', md5('y')::uuid, '{}', 21);
SELECT key, m, twice FROM cbtb_t WHERE m = 'angry' ORDER BY key;
SELECT count(*) AS planted_runs FROM cbtb_planted;
SELECT definition FROM cbt_info('cbtb_t');
-- the label, the copy a dump restores, says the same
SELECT convert_from(decode(substring(label FROM 'definition=(.*)$'), 'base64'), 'UTF8')
		= (SELECT definition FROM cbt_info('cbtb_t')) AS label_follows
	FROM pg_seclabels WHERE objoid = 'cbtb_t'::regclass AND provider = 'streamsketch';
-- and still resolves: applying it again to the table is accepted
DO $$
BEGIN
	EXECUTE format('SECURITY LABEL FOR streamsketch ON TABLE cbtb_t IS %L',
		(SELECT label FROM pg_seclabels WHERE objoid = 'cbtb_t'::regclass));
END $$;

-- An aggregate replaced with another state type is refused on use.
CREATE OR REPLACE AGGREGATE cbtb_s2.grand_total(integer) (sfunc = int84pl,
	stype = bigint, combinefunc = int8pl, finalfunc = int4, initcond = '0');
\c -
SELECT count(*) FROM cbtb_t;
\echo :LAST_ERROR_SQLSTATE

-- Definitions are checked as they are written.
-- a group key list that closes its parenthesis or ends the statement
SELECT cbt_create('cbtb_x', 'k int) ON COMMIT DROP; --', 'count(*) AS n');
\echo :LAST_ERROR_SQLSTATE
SELECT cbt_create('cbtb_x', 'k int) ON COMMIT DROP', 'count(*) AS n');
\echo :LAST_ERROR_SQLSTATE
SELECT cbt_create('cbtb_x', 'k int) WITHOUT OIDS', 'count(*) AS n');
\echo :LAST_ERROR_SQLSTATE
SELECT cbt_create('cbtb_x', 'k int, (j int', 'count(*) AS n');
\echo :LAST_ERROR_SQLSTATE
-- errors point into what the user wrote
\set VERBOSITY default
SELECT cbt_create('cbtb_x', 'k int', 'count(*) AS n, sum(q::bigint AS s');
SELECT cbt_create('cbtb_x', 'k int', 'count(*) AS n, cbtb_nosuch(q::integer) AS f');
SELECT cbt_create('cbtb_x', 'k int, j', 'count(*) AS n');
\set VERBOSITY terse
-- a temporary object in a permanent cbt's definition
CREATE TYPE pg_temp.cbtb_tmood AS ENUM ('x');
SELECT cbt_create('cbtb_x', 'k pg_temp.cbtb_tmood', 'count(*) AS n');
\echo :LAST_ERROR_SQLSTATE
SELECT cbt_create('pg_temp.cbtb_tx', 'k pg_temp.cbtb_tmood', 'count(*) AS n');
-- a column with a collation of its own, a domain key
CREATE DOMAIN cbtb_posint AS integer CHECK (VALUE > 0);
SELECT cbt_create('cbtb_c', 'k text COLLATE "C", p cbtb_posint',
	'count(*) AS n, max(t::text COLLATE "C") AS mt');
INSERT INTO cbtb_c (k, p, t) VALUES ('b', 1, 'x'), ('a', 2, 'Y'), ('B', 1, 'y'), ('b', 1, 'Z');
SELECT * FROM cbtb_c ORDER BY k;
INSERT INTO cbtb_c (k, p, t) VALUES ('b', -1, 'x');
\echo :LAST_ERROR_SQLSTATE

DROP TABLE cbtb_t, cbtb_ref, cbtb_c, cbtb_planted CASCADE;
DROP SCHEMA cbtb_s, cbtb_s2 CASCADE;
DROP DOMAIN cbtb_posint;
DROP ROLE regress_cbtb_reader;

-- The natural positional INSERT (keys, then inputs) would fill the
-- aggregates' columns, which come first: refused, naming the columns.
SELECT cbt_create('cbtb_pos', 'url text',
	'count(*) AS hits, sum(bytes::int) AS total_bytes, max(w::int) AS w');
INSERT INTO cbtb_pos SELECT 'u' || g, g FROM generate_series(1, 3) g;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
INSERT INTO cbtb_pos VALUES ('u1', 5);
\set VERBOSITY terse
-- named columns, or every column as a dump writes it, are accepted
INSERT INTO cbtb_pos (url, bytes, w) SELECT 'u' || g, g, g FROM generate_series(1, 3) g;
INSERT INTO cbtb_pos VALUES ('u1', 2, 10, 7, NULL);
SELECT * FROM cbtb_pos ORDER BY url;
DROP TABLE cbtb_pos;
