-- cbt: a GROUP BY maintained lazily in a compressed buffer tree
SET client_min_messages = warning;
-- the counters and reports below are read after this session's own
-- consolidation: its commits queue nothing for a background worker,
-- which would hold the consolidation lock meanwhile
SET streamsketch.background_consolidation = off;

-- the example of docs/cbt.md
SELECT cbt_create('ct_pages',
    group_by   => 'url text',
    aggregates => 'count(*) AS hits, sum(bytes::bigint) AS total_bytes,
                   avg(latency::float8) AS mean_latency, max(ts::timestamptz) AS last_seen,
                   min(bytes) AS smallest');
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'ct_pages'::regclass AND attnum > 0 ORDER BY attnum;
INSERT INTO ct_pages (url, bytes, latency, ts) VALUES
	('/a', 100, 0.5, '2026-01-01 10:00+00'),
	('/a', 300, 1.5, '2026-01-02 10:00+00'),
	('/b', 50, NULL, '2026-01-01 09:00+00'),
	(NULL, 7, 2.0, NULL);
SELECT * FROM ct_pages ORDER BY url NULLS LAST;

-- the same rows through a heap table and GROUP BY, many groups, with
-- small buffers so that the tree spills and splits
CREATE TABLE ct_rows (k int, v bigint, f float8, s text);
INSERT INTO ct_rows
SELECT g % 5003, g, (g % 97) / 7.0, 'x' || (g % 13)
FROM generate_series(1, 200000) g;
SELECT cbt_create('ct_big', group_by => 'k int',
                  aggregates => 'count(*) AS n, sum(v::bigint) AS sv,
                                 avg(f::float8) AS af, max(s::text) AS ms,
                                 bool_and(v > 3) AS b',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 4);
-- autovacuum would consolidate it at a time of its own, which what is
-- left in its log below must not depend on
ALTER TABLE ct_big SET (autovacuum_enabled = off);
SET streamsketch.change_log_limit = '64kB';
INSERT INTO ct_big (k, v, f, s) SELECT k, v, f, s FROM ct_rows WHERE v <= 100000;
INSERT INTO ct_big (k, v, f, s) SELECT k, v, f, s FROM ct_rows WHERE v > 100000;
-- cbt_info describes the tree as consolidated and does not consolidate:
-- the last INSERT's rows wait in the change log (pending_records)
SELECT height > 1 AS tree_grew, splits > 0 AS split, spills > 0 AS spilled,
       pending_records > 0 AS rows_pending, rows + pending_records = 200000 AS all_rows
FROM cbt_info('ct_big');
-- every group equal to GROUP BY's (floats within rounding)
CREATE TEMP VIEW ct_check AS
WITH t AS (SELECT k, count(*) AS n, sum(v) AS sv, avg(f) AS af, max(s) AS ms,
                  bool_and(v > 3) AS b
           FROM ct_rows GROUP BY k)
SELECT count(*) AS groups,
       count(*) FILTER (WHERE c.k IS NULL OR t.k IS NULL) AS missing,
       count(*) FILTER (WHERE c.n IS DISTINCT FROM t.n OR
                               c.sv IS DISTINCT FROM t.sv OR
                               c.ms IS DISTINCT FROM t.ms OR
                               c.b IS DISTINCT FROM t.b OR
                               NOT abs(c.af - t.af) <= 1e-9) AS wrong
FROM t FULL JOIN ct_big c USING (k);
SELECT * FROM ct_check;

-- cbt_lookup reads one group from its root-to-leaf path and the log.
-- More rows, left in the log: longer than a lookup consolidates before
-- reading it, shorter than the limit.
SET streamsketch.change_log_limit = '1MB';
INSERT INTO ct_rows
SELECT g % 5003, g, (g % 97) / 7.0, 'x' || (g % 13)
FROM generate_series(200001, 215000) g;
INSERT INTO ct_big (k, v, f, s) SELECT k, v, f, s FROM ct_rows WHERE v > 200000;
SELECT log_bytes > 65536 AS rows_in_log FROM streamsketch_log_info('ct_big');
-- every group's lookup equals GROUP BY's
CREATE TEMP VIEW ct_lookup_check AS
WITH t AS (SELECT k, count(*) AS n, sum(v) AS sv, avg(f) AS af, max(s) AS ms,
                  bool_and(v > 3) AS b
           FROM ct_rows GROUP BY k)
SELECT count(*) AS lookups,
       count(*) FILTER (WHERE l.k IS NULL OR
                              l.n IS DISTINCT FROM t.n OR
                              l.sv IS DISTINCT FROM t.sv OR
                              l.ms IS DISTINCT FROM t.ms OR
                              l.b IS DISTINCT FROM t.b OR
                              NOT abs(l.af - t.af) <= 1e-9) AS wrong
FROM t LEFT JOIN LATERAL cbt_lookup(NULL::ct_big, t.k) l ON true;
SELECT * FROM ct_lookup_check;
SELECT log_bytes > 65536 AS still_in_log FROM streamsketch_log_info('ct_big');
SELECT * FROM ct_check;
SET streamsketch.change_log_limit = '64kB';
SELECT * FROM cbt_lookup(NULL::ct_big, 5003);
SELECT k, n, sv FROM cbt_lookup(NULL::ct_big, 17);
-- the caller's own rows, not committed yet, and nothing once rolled back
BEGIN;
INSERT INTO ct_big (k, v) VALUES (17, 1), (-1, 2);
SELECT k, n, sv FROM cbt_lookup(NULL::ct_big, 17)
UNION ALL SELECT k, n, sv FROM cbt_lookup(NULL::ct_big, -1);
ROLLBACK;
SELECT k, n, sv FROM cbt_lookup(NULL::ct_big, 17)
UNION ALL SELECT k, n, sv FROM cbt_lookup(NULL::ct_big, -1);
-- keys of another type are coerced as an implicit cast would; an
-- unknown literal through the key type's input function
SELECT k, n FROM cbt_lookup(NULL::ct_big, '17');
SELECT k, n FROM cbt_lookup(NULL::ct_big, 17::smallint);
SELECT (cbt_lookup(NULL::ct_big, 17)).n;
SELECT cbt_lookup(NULL::ct_big, 17::bigint);
SELECT cbt_lookup(NULL::ct_big, 1, 2);
SELECT k, n FROM cbt_lookup(NULL::ct_big, VARIADIC ARRAY[17]);
SELECT k, n FROM cbt_lookup(cbt => NULL::ct_big, VARIADIC group_keys => ARRAY[17]);
SELECT cbt_lookup(NULL::ct_big, VARIADIC NULL::int[]);
SELECT cbt_lookup(NULL::int, 17);
SELECT cbt_lookup(NULL::ct_rows, 17);

-- finalize pushes every buffer down: one PAO per group at the leaves,
-- and the same answers
SELECT cbt_finalize('ct_big') AS groups;
SELECT cbt_finalize('ct_big') AS groups_again;
SELECT * FROM ct_check;
SELECT * FROM ct_lookup_check;

-- many rounds over many small nodes free extents all over the file: the
-- free list goes on in pages past the metapage's 128 extents and forgets
-- none
SELECT cbt_create('ct_churn', group_by => 'k int', aggregates => 'count(*) AS n, sum(v::bigint) AS sv',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 16);
DO $$
BEGIN
	FOR i IN 1..120 LOOP
		INSERT INTO ct_churn (k, v) SELECT (g * 7919 + i) % 40000, g FROM generate_series(1, 5000) g;
		COMMIT;
	END LOOP;
END
$$;
SELECT free_extents > 128 AS list_in_pages, leaked_pages,
       free_pages < relation_pages AS free_within
FROM cbt_info('ct_churn');
SELECT count(*) AS groups, sum(n) AS rows, sum(sv) = 120 * (5000 * 5001 / 2) AS sums_right
FROM ct_churn;

-- a leaf over its limit splits in equal pieces, each at least a quarter of
-- a node buffer: after cbt_finalize (all PAOs in the leaves, one per group)
-- the leaves hold more than that on average (split into a full piece and
-- the rest, as before, half of them held a crumb: 5.7 kB on average here)
SELECT cbt_create('ct_split', group_by => 'k int', aggregates => 'count(*) AS n',
                  root_buffer => '64kB', node_buffer => '32kB', fanout => 16);
DO $$
BEGIN
	FOR i IN 1..40 LOOP
		INSERT INTO ct_split (k) SELECT (g * 7919 + i * 104729) % 20000 FROM generate_series(1, 5000) g;
		COMMIT;
	END LOOP;
END
$$;
SELECT cbt_finalize('ct_split') AS groups;
SELECT stored_bytes / fragments > 32768 / 4 AS leaves_over_a_quarter_buffer, splits > 8 AS split
FROM cbt_info('ct_split');
SELECT count(*) AS groups, sum(n) AS rows FROM ct_split;

-- groups as GROUP BY makes them: keys equal under the type's equality
-- (numeric 1.0 = 1.00), NULL keys in one group, several key columns,
-- long (toasted) text keys; internal states (numeric avg), array states
-- (stddev), the extension's own aggregates; and 3-bit hashes, so that
-- most keys collide and only key comparison keeps groups apart
SET streamsketch.test_cbt_hash_bits = 3;
CREATE TABLE ct_rows2 (a numeric, b text, x numeric, y float8, u bigint);
INSERT INTO ct_rows2
SELECT CASE WHEN g % 11 = 0 THEN NULL ELSE (g % 7)::numeric END
		   + CASE WHEN g % 2 = 0 THEN 0.0 ELSE 0.00 END,
	   CASE WHEN g % 5 = 0 THEN NULL WHEN g % 5 = 1 THEN repeat('long', 1000 + g % 3)
			ELSE 'k' || (g % 3) END,
	   g / 3.0, g % 17, g % 101
FROM generate_series(1, 30000) g;
SELECT cbt_create('ct_multi', group_by => 'a numeric, b text',
                  aggregates => 'count(x::numeric) AS n, avg(x) AS ax,
                                 stddev(y::float8) AS sy,
                                 qfilter_agg(u::bigint, 1000, 0.01) AS users',
                  node_buffer => '16kB', fanout => 4);
RESET streamsketch.test_cbt_hash_bits;
INSERT INTO ct_multi (a, b, x, y, u) SELECT * FROM ct_rows2 WHERE x < 3000;
INSERT INTO ct_multi (a, b, x, y, u) SELECT * FROM ct_rows2 WHERE x >= 3000;
-- the same groups and values both ways (EXCEPT compares NULL keys as
-- equal, as GROUP BY does; floats to six decimals)
WITH t AS (SELECT a, b, count(x) AS n, avg(x) AS ax,
                  round(stddev(y)::numeric, 6) AS sy
           FROM ct_rows2 GROUP BY a, b),
     c AS (SELECT a, b, n, ax, round(sy::numeric, 6) AS sy FROM ct_multi)
SELECT (SELECT count(*) FROM t) AS groups, (SELECT count(*) FROM c) AS cbt_groups,
       (SELECT count(*) FROM (TABLE t EXCEPT TABLE c) d) AS only_group_by,
       (SELECT count(*) FROM (TABLE c EXCEPT TABLE t) d) AS only_cbt,
       (SELECT count(*) FROM ct_multi WHERE users IS NULL) AS no_filter;
-- lookups find each group among the colliding ones (NULL keys too)
SELECT count(*) AS lookups,
       count(*) FILTER (WHERE l.n IS DISTINCT FROM c.n OR
                              l.ax IS DISTINCT FROM c.ax) AS differ
FROM ct_multi c LEFT JOIN LATERAL cbt_lookup(NULL::ct_multi, c.a, c.b) l ON true;
SELECT a, b, n FROM cbt_lookup(NULL::ct_multi, NULL, NULL);
SELECT a, b, n FROM cbt_lookup(NULL::ct_multi, 1.000, 'k1');
SELECT count(*) FROM cbt_lookup(NULL::ct_multi, 1, 'k9');
-- a group's distinct users, from its qfilter
SELECT qfilter_contains(users, 5::bigint) AS has_5
FROM ct_multi WHERE a = 1 AND b = 'k1';
SELECT count(*) FILTER (WHERE length(b) > 3000) AS long_keys,
       count(*) FILTER (WHERE a IS NULL) AS null_a
FROM ct_multi;

-- A row with values in the aggregates' columns is a group, as a dump
-- writes it: where every result is its aggregate's state (no final
-- function) it merges into the group of its key, so a table's rows
-- inserted into a copy make the same groups (pg_dump's round trip)
SELECT cbt_create('ct_dump', group_by => 'k int, t text',
                  aggregates => 'count(*) AS n, sum(v::int) AS sv, min(v) AS mn,
                                 max(x::int) AS x, bool_and(b::bool) AS ba',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 4);
SELECT cbt_create('ct_dump_copy', group_by => 'k int, t text',
                  aggregates => 'count(*) AS n, sum(v::int) AS sv, min(v) AS mn,
                                 max(x::int) AS x, bool_and(b::bool) AS ba');
INSERT INTO ct_dump (k, t, v, x, b)
SELECT g % 1000, CASE WHEN g % 7 = 0 THEN NULL ELSE 't' || (g % 3) END,
       CASE WHEN g % 11 = 0 THEN NULL ELSE g END, g % 50, g % 13 <> 0
FROM generate_series(1, 20000) g;
INSERT INTO ct_dump_copy SELECT * FROM ct_dump;
SELECT (SELECT count(*) FROM ct_dump) AS groups,
       (SELECT count(*) FROM (TABLE ct_dump EXCEPT TABLE ct_dump_copy) d) AS only_source,
       (SELECT count(*) FROM (TABLE ct_dump_copy EXCEPT TABLE ct_dump) d) AS only_copy;
-- and the copy goes on from there: more inputs, and the groups again
-- (each merges: counts and sums add up)
INSERT INTO ct_dump (k, t, v, x, b) VALUES (1, 't1', 5, 99, true);
INSERT INTO ct_dump_copy (k, t, v, x, b) VALUES (1, 't1', 5, 99, true);
SELECT cbt_finalize('ct_dump_copy') > 0 AS finalized;
SELECT (SELECT count(*) FROM (TABLE ct_dump EXCEPT TABLE ct_dump_copy) d) AS only_source,
       (SELECT count(*) FROM (TABLE ct_dump_copy EXCEPT TABLE ct_dump) d) AS only_copy;
INSERT INTO ct_dump_copy SELECT * FROM ct_dump WHERE k = 1;
SELECT c.n = 2 * d.n AND c.sv = 2 * d.sv AND c.mn = d.mn AND c.x = d.x AS merged
FROM ct_dump d JOIN ct_dump_copy c USING (k, t) WHERE k = 1 AND t = 't1';
SELECT n, x FROM cbt_lookup(NULL::ct_dump_copy, 1, 't1');
-- a group's row with an input too is refused
INSERT INTO ct_dump_copy (k, t, n, sv, mn, x, ba, v, b)
VALUES (1, 't1', 1, NULL, NULL, NULL, NULL, 5, NULL);
-- results that are not states (avg's final function, numeric sum's
-- internal state) cannot become a group again: refused, with the hint
-- that such a table's dump cannot be restored
INSERT INTO ct_big SELECT * FROM ct_big LIMIT 1;
-- an input carries its result's column only if adding it is combining
-- it: a dump's value then means the same both ways (count does not)
SELECT cbt_create('ct_bad', group_by => 'k int', aggregates => 'count(x::int8) AS x');
SELECT cbt_create('ct_bad', group_by => 'k int', aggregates => 'avg(x::numeric) AS x');

-- a session keeps one runtime (the definition's aggregates, ready to
-- run) per cbt it used, rebuilt when the table changes, dropped with it
CREATE TEMP TABLE ct_rt AS
SELECT count(*) AS before FROM pg_backend_memory_contexts WHERE name = 'cbt runtime';
DO $$
BEGIN
	FOR i IN 1 .. 5 LOOP
		PERFORM cbt_create('ct_tmp' || i, 'k int', 'count(*) AS n');
		EXECUTE format('INSERT INTO ct_tmp%s (k) VALUES (1)', i);
	END LOOP;
END
$$;
SELECT count(*) - (SELECT before FROM ct_rt) AS new_runtimes
FROM pg_backend_memory_contexts WHERE name = 'cbt runtime';
ALTER TABLE ct_tmp1 OWNER TO CURRENT_USER;
VACUUM ct_tmp2;
SELECT n FROM ct_tmp1 UNION ALL SELECT n FROM ct_tmp2;
SELECT count(*) - (SELECT before FROM ct_rt) AS after_rebuilds
FROM pg_backend_memory_contexts WHERE name = 'cbt runtime';
DROP TABLE ct_tmp1, ct_tmp2, ct_tmp3, ct_tmp4, ct_tmp5;
SELECT n FROM ct_dump WHERE k = 1 AND t = 't1';
SELECT count(*) - (SELECT before FROM ct_rt) AS after_drop
FROM pg_backend_memory_contexts WHERE name = 'cbt runtime';

-- TRUNCATE keeps the definition
TRUNCATE ct_multi;
INSERT INTO ct_multi (a, b, x, y, u) VALUES (1, 'z', 2, 3, 4);
SELECT a, b, n, ax FROM ct_multi;

-- rolled back rows leave nothing
BEGIN;
INSERT INTO ct_pages (url, bytes) VALUES ('/rolled', 1);
ROLLBACK;
SELECT count(*) FROM ct_pages WHERE url = '/rolled';

-- refused definitions
DO $$
DECLARE
	defs text[] := ARRAY[
		'percentile_cont(0.5) WITHIN GROUP (ORDER BY x::float8) AS p',
		'count(DISTINCT x::int) AS d',
		'count(*) FILTER (WHERE x::int > 0) AS c',
		'count(*) + 1 AS c',
		'xmlagg(x::xml) AS x',
		'count(*)',
		'sum(x) AS s',
		'sum(x::int) AS s, max(x::bigint) AS m',
		'sum(x::bigint) AS x',
		'count(*) FROM pg_class',
		'count(*) AS k'];
	d text;
BEGIN
	FOREACH d IN ARRAY defs LOOP
		BEGIN
			PERFORM cbt_create('ct_bad', group_by => 'k int', aggregates => d);
			RAISE NOTICE 'accepted: %', d;
		EXCEPTION WHEN OTHERS THEN
			RAISE WARNING '% -> %: %', d, SQLSTATE, SQLERRM;
		END;
	END LOOP;
END
$$;
-- a value in a result column makes the row a group; ct_pages' bigint sum
-- keeps an internal state, not its result, so ct_pages cannot take it
INSERT INTO ct_pages (url, hits, total_bytes, mean_latency, last_seen, smallest, bytes, latency, ts)
VALUES ('/c', 5, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

-- CREATE TABLE ... USING cbt has no definition: refused at the first use
CREATE TABLE ct_nodef (k int, n bigint) USING cbt;
INSERT INTO ct_nodef VALUES (1, NULL);
SELECT cbt_finalize('ct_nodef');
CREATE TABLE ct_heap (k int);
SELECT cbt_info('ct_heap');

-- an ordinary role creates, fills and reads its own cbt
CREATE ROLE ct_user;
CREATE ROLE ct_other;
CREATE SCHEMA ct_schema AUTHORIZATION ct_user;
SET ROLE ct_user;
SELECT cbt_create('ct_schema.mine', group_by => 'k int',
                  aggregates => 'sum(v::int) AS total');
INSERT INTO ct_schema.mine (k, v) SELECT g % 3, g FROM generate_series(1, 10) g;
SELECT k, total FROM ct_schema.mine ORDER BY k;
SELECT cbt_finalize('ct_schema.mine');
SELECT * FROM cbt_lookup(NULL::ct_schema.mine, 2);
RESET ROLE;

-- the aggregates run as the table's owner, and the definition's names
-- resolve as they did at creation, whoever reads or writes: a reader
-- whose search_path finds its own who() first changes nothing
SET ROLE ct_user;
CREATE FUNCTION ct_schema.who_trans(s text, v int) RETURNS text
LANGUAGE sql AS 'SELECT current_user::text';
CREATE FUNCTION ct_schema.who_comb(a text, b text) RETURNS text
LANGUAGE sql AS 'SELECT coalesce(a, b)';
CREATE AGGREGATE ct_schema.who(int) (SFUNC = ct_schema.who_trans, STYPE = text,
                                     COMBINEFUNC = ct_schema.who_comb);
SET search_path = ct_schema, public;
SELECT cbt_create('ct_schema.runs_as', group_by => 'k int',
                  aggregates => 'who(v::int) AS who, sum(v) AS total');
RESET search_path;
-- stored with the schema the creator's search_path found it in
SELECT definition LIKE '%ct_schema.who(%' AS qualified
FROM cbt_info('ct_schema.runs_as');
-- the table depends on the aggregates its definition names, as a view
-- does: they cannot be dropped from under it
DROP AGGREGATE ct_schema.who(int);
-- and so does a copy made as pg_restore makes it (the definition comes
-- with the label)
CREATE TABLE ct_schema.restored (k int, who text, total bigint, v int) USING cbt;
DO $$
BEGIN
	EXECUTE format('SECURITY LABEL FOR streamsketch ON TABLE ct_schema.restored IS %L',
				   (SELECT label FROM pg_seclabels
					WHERE objoid = 'ct_schema.runs_as'::regclass AND objsubid = 0));
END
$$;
DROP AGGREGATE ct_schema.who(int);
INSERT INTO ct_schema.restored (k, v) VALUES (1, 4), (1, 5);
SELECT k, who, total FROM ct_schema.restored;
GRANT USAGE ON SCHEMA ct_schema TO ct_other;
GRANT SELECT, INSERT ON ct_schema.runs_as TO ct_other;
RESET ROLE;
-- a lookup needs SELECT on the table
SET ROLE ct_other;
SELECT * FROM cbt_lookup(NULL::ct_schema.mine, 2);
RESET ROLE;
CREATE SCHEMA ct_evil AUTHORIZATION ct_other;
SET ROLE ct_other;
CREATE FUNCTION ct_evil.sum_trans(s int, v int) RETURNS int
LANGUAGE sql AS 'SELECT 42';
CREATE AGGREGATE ct_evil.sum(int) (SFUNC = ct_evil.sum_trans, STYPE = int,
                                   COMBINEFUNC = int4larger);
CREATE AGGREGATE ct_evil.who(int) (SFUNC = ct_evil.sum_trans, STYPE = int,
                                   COMBINEFUNC = int4larger);
SET search_path = ct_evil, ct_schema, public;
INSERT INTO ct_schema.runs_as (k, v) VALUES (1, 10), (1, 20), (2, 5);
SELECT k, who, total FROM ct_schema.runs_as ORDER BY k;
SELECT who, total FROM cbt_lookup(NULL::ct_schema.runs_as, 1);
SELECT cbt_finalize('ct_schema.runs_as');
SELECT k, who, total FROM ct_schema.runs_as ORDER BY k;
SELECT who, total FROM cbt_lookup(NULL::ct_schema.runs_as, 1);
RESET search_path;
RESET ROLE;

DROP VIEW ct_check, ct_lookup_check;
DROP TABLE ct_rt;
DROP TABLE ct_pages, ct_big, ct_churn, ct_split, ct_rows, ct_multi, ct_rows2, ct_nodef, ct_heap,
  ct_dump, ct_dump_copy;
DROP SCHEMA ct_schema CASCADE;
DROP SCHEMA ct_evil CASCADE;
DROP ROLE ct_user;
DROP ROLE ct_other;
