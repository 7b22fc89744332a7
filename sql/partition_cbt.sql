-- Partitioned parents of cbt tables (docs/partitions.md): cbt_lookup on
-- the parent reads the one partition that can hold the group when every
-- level is partitioned by group keys (hash on two keys, list on the
-- second key, range on both with a sub-level partitioned by an
-- expression), and otherwise combines every partition's partial
-- aggregates of the group (a parent partitioned by an input column):
-- either way the answer of one cbt fed the whole stream, checked against
-- GROUP BY over a heap of the same rows.  cbt_info merges the partitions'
-- rows, cbt_finalize finalizes every partition; privileges and
-- row-level security are the parent's; partitions of different
-- definitions are refused.
SET client_min_messages = warning;
SET streamsketch.background_consolidation = off;

-- one definition for every partition: two group keys, and aggregates
-- whose partial states combine (avg's exactly, numeric)
CREATE FUNCTION pc_make(name text) RETURNS regclass LANGUAGE sql AS $$
	SELECT cbt_create(name, group_by => 'a text, b int',
		aggregates => 'count(*) AS n, sum(v::int) AS s, avg(v) AS av, min(v) AS mn, max(w::float8) AS mx')
$$;

-- the stream: 3000 rows, 13 x 5 groups and a NULL key; some NULL inputs
CREATE TABLE pc_heap (a text, b int, v int, w float8);
INSERT INTO pc_heap
SELECT CASE WHEN g % 50 = 0 THEN NULL ELSE 'k' || (g % 13) END, g % 5,
	   CASE WHEN g % 11 = 0 THEN NULL ELSE g % 97 END, g * 0.5
FROM generate_series(1, 3000) g;
CREATE VIEW pc_groups AS
SELECT a, b, count(*) AS n, sum(v) AS s, avg(v) AS av, min(v) AS mn, max(w) AS mx
FROM pc_heap GROUP BY a, b;

-- hash on both group keys: routed
CREATE TABLE pc_h (a text, b int, n bigint, s bigint, av numeric, mn int,
				   mx float8, v int, w float8) PARTITION BY HASH (b, a);
SELECT pc_make('pc_h_0'), pc_make('pc_h_1'), pc_make('pc_h_2');
ALTER TABLE pc_h ATTACH PARTITION pc_h_0 FOR VALUES WITH (MODULUS 3, REMAINDER 0);
ALTER TABLE pc_h ATTACH PARTITION pc_h_1 FOR VALUES WITH (MODULUS 3, REMAINDER 1);
ALTER TABLE pc_h ATTACH PARTITION pc_h_2 FOR VALUES WITH (MODULUS 3, REMAINDER 2);

-- list on the second group key, with a default: routed; the parent's
-- columns in another order than its partitions'
CREATE TABLE pc_l (mx float8, b int, a text, s bigint, n bigint, av numeric,
				   mn int, w float8, v int) PARTITION BY LIST (b);
SELECT pc_make('pc_l_01'), pc_make('pc_l_2'), pc_make('pc_l_d');
ALTER TABLE pc_l ATTACH PARTITION pc_l_01 FOR VALUES IN (0, 1);
ALTER TABLE pc_l ATTACH PARTITION pc_l_2 FOR VALUES IN (2);
ALTER TABLE pc_l ATTACH PARTITION pc_l_d DEFAULT;

-- range on both group keys; the upper range partitioned again by an
-- expression, below which the partitions are combined; NULL keys go to
-- the default partition
CREATE TABLE pc_r (a text, b int, n bigint, s bigint, av numeric, mn int,
				   mx float8, v int, w float8) PARTITION BY RANGE (a, b);
SELECT pc_make('pc_r_lo'), pc_make('pc_r_x0'), pc_make('pc_r_x1'), pc_make('pc_r_d');
ALTER TABLE pc_r ATTACH PARTITION pc_r_lo FOR VALUES FROM (MINVALUE, MINVALUE) TO ('k5', 2);
CREATE TABLE pc_r_hi PARTITION OF pc_r FOR VALUES FROM ('k5', 2) TO (MAXVALUE, MAXVALUE)
	PARTITION BY LIST ((length(a) % 2));
ALTER TABLE pc_r_hi ATTACH PARTITION pc_r_x0 FOR VALUES IN (0);
ALTER TABLE pc_r_hi ATTACH PARTITION pc_r_x1 FOR VALUES IN (1);
ALTER TABLE pc_r ATTACH PARTITION pc_r_d DEFAULT;

-- range on an input column: a group's rows are in every partition, and
-- its partial aggregates are combined
CREATE TABLE pc_x (a text, b int, n bigint, s bigint, av numeric, mn int,
				   mx float8, v int, w float8) PARTITION BY RANGE (v);
-- (the last one's definition written otherwise: the same definition)
SELECT pc_make('pc_x_1'), pc_make('pc_x_2');
SELECT cbt_create('pc_x_3', group_by => 'a  text, b int',
	aggregates => 'count(*) AS n,  sum(v::int) AS s, avg(v) AS av, min(v) AS mn, max(w::float8) AS mx');
ALTER TABLE pc_x ATTACH PARTITION pc_x_1 FOR VALUES FROM (MINVALUE) TO (30);
ALTER TABLE pc_x ATTACH PARTITION pc_x_2 FOR VALUES FROM (30) TO (60);
ALTER TABLE pc_x ATTACH PARTITION pc_x_3 DEFAULT;

-- the stream through each parent
INSERT INTO pc_h (a, b, v, w) SELECT * FROM pc_heap;
INSERT INTO pc_l (a, b, v, w) SELECT * FROM pc_heap;
INSERT INTO pc_r (a, b, v, w) SELECT * FROM pc_heap;
INSERT INTO pc_x (a, b, v, w) SELECT * FROM pc_heap;

-- Every group (and two absent ones) looked up on parent p equals GROUP BY
-- over the heap: the number of groups that differ, then those found.
CREATE FUNCTION pc_check(p regclass) RETURNS TABLE (differ bigint, found bigint)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE format($q$
		SELECT count(*) FILTER (WHERE (l.n, l.s, l.av, l.mn, l.mx) IS DISTINCT FROM
										(h.n, h.s, h.av, h.mn, h.mx)),
			   count(l.n)
		FROM (SELECT * FROM pc_groups
			  UNION ALL SELECT 'nope', 1, NULL, NULL, NULL, NULL, NULL
			  UNION ALL SELECT 'k1', NULL, NULL, NULL, NULL, NULL, NULL) h
		LEFT JOIN LATERAL cbt_lookup(NULL::%s, h.a, h.b) l ON true$q$, p);
END $$;
SELECT count(*) AS groups FROM pc_groups;
SELECT 'pc_h' AS parent, * FROM pc_check('pc_h')
UNION ALL SELECT 'pc_l', * FROM pc_check('pc_l')
UNION ALL SELECT 'pc_r', * FROM pc_check('pc_r')
UNION ALL SELECT 'pc_x', * FROM pc_check('pc_x');
-- the rows, in the parent's row type
SELECT * FROM cbt_lookup(NULL::pc_l, 'k3', 3);
SELECT * FROM cbt_lookup(NULL::pc_x, 'k3', 3);
SELECT * FROM cbt_lookup(NULL::pc_r, NULL, 0);
SELECT * FROM pc_groups WHERE a = 'k3' AND b = 3 OR a IS NULL AND b = 0 ORDER BY a;
-- the keys coerced as for one cbt; VARIADIC; as many keys as group keys
SELECT n FROM cbt_lookup(NULL::pc_h, 'k3', '3');
SELECT n FROM cbt_lookup(NULL::pc_x, VARIADIC ARRAY['k3', NULL]);
SELECT cbt_lookup(NULL::pc_h, 'k3');

-- uncommitted rows of this transaction count, routed or combined
BEGIN;
INSERT INTO pc_h (a, b, v, w) VALUES ('k3', 3, 1000, 1e6);
INSERT INTO pc_x (a, b, v, w) VALUES ('k3', 3, 1000, 1e6);
SELECT n, s, mx FROM cbt_lookup(NULL::pc_h, 'k3', 3)
UNION ALL SELECT n, s, mx FROM cbt_lookup(NULL::pc_x, 'k3', 3);
ROLLBACK;

-- cbt_info: the definition and parameters shared, counters summed:
-- equal to the sums of the partitions' own rows
SELECT definition IS NOT NULL AS one_definition, fanout, compression,
	   rows + pending_records AS rows_in
FROM cbt_info('pc_x');
SELECT i.rows + i.pending_records = (SELECT sum(p.rows + p.pending_records)
									 FROM pg_partition_tree('pc_r') t, cbt_info(t.relid) p
									 WHERE t.isleaf) AS rows_summed,
	   i.relation_pages = (SELECT sum(p.relation_pages)
						   FROM pg_partition_tree('pc_r') t, cbt_info(t.relid) p
						   WHERE t.isleaf) AS pages_summed
FROM cbt_info('pc_r') i;

-- cbt_finalize: every partition, groups summed (a group split over
-- partitions counts in each); the lookups still agree
SELECT cbt_finalize('pc_h') AS h, cbt_finalize('pc_l') AS l, cbt_finalize('pc_r') AS r,
	   cbt_finalize('pc_x') AS x;
SELECT height, rows, pending_records FROM cbt_info('pc_x');
SELECT 'pc_h' AS parent, * FROM pc_check('pc_h')
UNION ALL SELECT 'pc_x', * FROM pc_check('pc_x');

-- a parent without partitions: no group, empty counters
CREATE TABLE pc_empty (a text, b int, n bigint, s bigint, av numeric, mn int,
					   mx float8, v int, w float8) PARTITION BY LIST (b);
SELECT * FROM cbt_lookup(NULL::pc_empty, 'k3', 3);
SELECT definition, rows, relation_pages FROM cbt_info('pc_empty');
SELECT cbt_finalize('pc_empty');

-- privileges are the parent's: SELECT on it alone lets a role look up
-- and read the info, not finalize (INSERT), nor read a partition itself
CREATE ROLE pc_reader;
GRANT SELECT ON pc_h TO pc_reader;
SET ROLE pc_reader;
SELECT n FROM cbt_lookup(NULL::pc_h, 'k3', 3);
SELECT rows > 0 AS has_rows FROM cbt_info('pc_h');
SELECT cbt_finalize('pc_h');
SELECT n FROM cbt_lookup(NULL::pc_h_0, 'k3', 3);
SELECT n FROM cbt_lookup(NULL::pc_x, 'k3', 3);
RESET ROLE;
-- row-level security of the parent: lookups refused, the info allowed
ALTER TABLE pc_h ENABLE ROW LEVEL SECURITY;
CREATE POLICY pc_p ON pc_h FOR SELECT USING (b = 1);
SET ROLE pc_reader;
SELECT n FROM cbt_lookup(NULL::pc_h, 'k3', 3);
SELECT rows > 0 AS has_rows FROM cbt_info('pc_h');
RESET ROLE;
DROP POLICY pc_p ON pc_h;
ALTER TABLE pc_h DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON pc_h FROM pc_reader;
DROP ROLE pc_reader;

-- partitions of different definitions, with the parent's columns (the
-- last partition's mn is max(v)), are refused when attached or created
CREATE TABLE pc_bad (a text, b int, n bigint, s bigint, av numeric, mn int,
					 mx float8, v int, w float8) PARTITION BY LIST (b);
SELECT pc_make('pc_bad_0');
SELECT cbt_create('pc_bad_1', group_by => 'a text, b int',
	aggregates => 'count(*) AS n, sum(v::int) AS s, avg(v) AS av, max(v) AS mn, max(w::float8) AS mx');
ALTER TABLE pc_bad ATTACH PARTITION pc_bad_0 FOR VALUES IN (0);
ALTER TABLE pc_bad ATTACH PARTITION pc_bad_1 FOR VALUES IN (1);
\echo :LAST_ERROR_SQLSTATE
-- where the check was bypassed (the guard's trigger disabled, as by a
-- superuser), cbt_lookup checks the partitions it reads: groups routed
-- to the first are read, one routed to the other is refused
ALTER EVENT TRIGGER streamsketch_guard_end DISABLE;
ALTER TABLE pc_bad ATTACH PARTITION pc_bad_1 FOR VALUES IN (1);
ALTER EVENT TRIGGER streamsketch_guard_end ENABLE ALWAYS;
INSERT INTO pc_bad (a, b, v, w) SELECT * FROM pc_heap WHERE b IN (0, 1);
SELECT n FROM cbt_lookup(NULL::pc_bad, 'k3', 0);
SELECT n FROM cbt_lookup(NULL::pc_bad, 'k3', 1);
\echo :LAST_ERROR_SQLSTATE
-- no partition takes a NULL b: no group, nothing read
SELECT n FROM cbt_lookup(NULL::pc_bad, 'k3', NULL);
-- other group keys: the number of keys is the first partition's
SELECT cbt_create('pc_bad_2', group_by => 'a text',
	aggregates => 'count(*) AS n, sum(v::int) AS s, avg(v) AS av, min(v) AS mn, max(w::float8) AS mx, min(b::int) AS b');
ALTER TABLE pc_bad DETACH PARTITION pc_bad_1;
ALTER EVENT TRIGGER streamsketch_guard_end DISABLE;
ALTER TABLE pc_bad ATTACH PARTITION pc_bad_2 FOR VALUES IN (2);
ALTER EVENT TRIGGER streamsketch_guard_end ENABLE ALWAYS;
SELECT n FROM cbt_lookup(NULL::pc_bad, 'k3', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT definition IS NULL AS definitions_differ, rows + pending_records AS rows_in FROM cbt_info('pc_bad');
-- a detached partition keeps its groups, and answers alone
SELECT n FROM cbt_lookup(NULL::pc_bad_1, 'k3', 1);

DROP TABLE pc_h, pc_l, pc_r, pc_x, pc_empty, pc_bad, pc_bad_1;
DROP VIEW pc_groups;
DROP TABLE pc_heap;
DROP FUNCTION pc_make(text), pc_check(regclass);
