-- Partitioned parents of bcms, bloom_filter and quotient_filter tables
-- (docs/partitions.md): a key function on the parent answers as the
-- partition that holds the key when every level is partitioned by the key
-- (hash, list, range, sub-partitions), and combines every partition's
-- answer otherwise (count-min: sum; filters: OR; qf_count: sum); the info
-- functions merge the partitions' rows; a parent's partitions are one
-- kind of structure.
SET client_min_messages = warning;

-- For structure kind am: trees s_<strategy>_<am> of structures and, with
-- the same bounds, heap twins t_<strategy>_<am> that tell by tableoid
-- where PostgreSQL routes a key.  h: hash; l: list with a default;
-- r: range, one partition hash-partitioned by the key again, one
-- partitioned by an expression of the key (k % 2); x: partitioned by an
-- expression (k % 3), so never routed.  Keys 1..60, key g (g % 7 + 1)
-- times, into the structures.
CREATE FUNCTION make_trees(am text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	p text;
	u text;
	s text;
BEGIN
	FOREACH p IN ARRAY ARRAY['s', 't'] LOOP
		u := CASE p WHEN 's' THEN ' USING ' || am ELSE '' END;
		EXECUTE format('CREATE TABLE %1$s_h_%2$s (k int) PARTITION BY HASH (k)', p, am);
		FOR i IN 0..2 LOOP
			EXECUTE format('CREATE TABLE %1$s_h_%2$s_%3$s PARTITION OF %1$s_h_%2$s FOR VALUES WITH (MODULUS 3, REMAINDER %3$s)%4$s', p, am, i, u);
		END LOOP;
		EXECUTE format('CREATE TABLE %1$s_l_%2$s (k int) PARTITION BY LIST (k)', p, am);
		EXECUTE format('CREATE TABLE %1$s_l_%2$s_a PARTITION OF %1$s_l_%2$s FOR VALUES IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)%3$s', p, am, u);
		EXECUTE format('CREATE TABLE %1$s_l_%2$s_b PARTITION OF %1$s_l_%2$s FOR VALUES IN (11, 12, 13, 14, 15, 16, 17, 18, 19, 20)%3$s', p, am, u);
		EXECUTE format('CREATE TABLE %1$s_l_%2$s_d PARTITION OF %1$s_l_%2$s DEFAULT%3$s', p, am, u);
		EXECUTE format('CREATE TABLE %1$s_r_%2$s (k int) PARTITION BY RANGE (k)', p, am);
		EXECUTE format('CREATE TABLE %1$s_r_%2$s_a PARTITION OF %1$s_r_%2$s FOR VALUES FROM (MINVALUE) TO (20)%3$s', p, am, u);
		EXECUTE format('CREATE TABLE %1$s_r_%2$s_b PARTITION OF %1$s_r_%2$s FOR VALUES FROM (20) TO (40) PARTITION BY HASH (k)', p, am);
		EXECUTE format('CREATE TABLE %1$s_r_%2$s_b0 PARTITION OF %1$s_r_%2$s_b FOR VALUES WITH (MODULUS 2, REMAINDER 0)%3$s', p, am, u);
		EXECUTE format('CREATE TABLE %1$s_r_%2$s_b1 PARTITION OF %1$s_r_%2$s_b FOR VALUES WITH (MODULUS 2, REMAINDER 1)%3$s', p, am, u);
		EXECUTE format('CREATE TABLE %1$s_r_%2$s_c PARTITION OF %1$s_r_%2$s FOR VALUES FROM (40) TO (MAXVALUE) PARTITION BY LIST ((k %% 2))', p, am);
		EXECUTE format('CREATE TABLE %1$s_r_%2$s_c0 PARTITION OF %1$s_r_%2$s_c FOR VALUES IN (0)%3$s', p, am, u);
		EXECUTE format('CREATE TABLE %1$s_r_%2$s_c1 PARTITION OF %1$s_r_%2$s_c FOR VALUES IN (1)%3$s', p, am, u);
		EXECUTE format('CREATE TABLE %1$s_x_%2$s (k int) PARTITION BY LIST ((k %% 3))', p, am);
		FOR i IN 0..2 LOOP
			EXECUTE format('CREATE TABLE %1$s_x_%2$s_%3$s PARTITION OF %1$s_x_%2$s FOR VALUES IN (%3$s)%4$s', p, am, i, u);
		END LOOP;
	END LOOP;
	FOREACH s IN ARRAY ARRAY['h', 'l', 'r', 'x'] LOOP
		EXECUTE format('INSERT INTO s_%1$s_%2$s SELECT g FROM generate_series(1, 60) g, generate_series(1, g %% 7 + 1)', s, am);
	END LOOP;
END $$;

-- The key function's answer on rel: an estimate, a membership, or a
-- quotient filter's count and membership.
CREATE FUNCTION answer(am text, rel regclass, k int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	EXECUTE format(CASE am
		WHEN 'bcms' THEN 'SELECT bcms_estimate(%1$L::regclass, %2$s)::text'
		WHEN 'bloom_filter' THEN 'SELECT bloom_contains(%1$L::regclass, %2$s)::text'
		ELSE 'SELECT qf_count(%1$L::regclass, %2$s) || '' '' || qf_contains(%1$L::regclass, %2$s)'
		END, rel::text, k) INTO r;
	RETURN r;
END $$;

-- The answers of every leaf below rel combined by the structure's rule.
CREATE FUNCTION combined(am text, rel regclass, k int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	EXECUTE format(CASE am
		WHEN 'bcms' THEN 'SELECT coalesce(sum(a::bigint), 0)::text'
		WHEN 'bloom_filter' THEN 'SELECT coalesce(bool_or(a::bool), false)::text'
		ELSE 'SELECT coalesce(sum(split_part(a, '' '', 1)::bigint), 0) || '' '' || coalesce(bool_or(split_part(a, '' '', 2)::bool), false)'
		END || ' FROM pg_partition_tree(%1$L::regclass) t, answer(%2$L, t.relid, %3$s) a WHERE t.isleaf',
		rel::text, am, k) INTO r;
	RETURN r;
END $$;

-- Where PostgreSQL routes key k in twin tree t_<tree>_<am>: the
-- structure partition of the same name, or for the range tree's
-- partition by an expression, its parent, whose leaves are combined.
CREATE FUNCTION holder(am text, tree text, k int) RETURNS regclass
LANGUAGE plpgsql AS $$
DECLARE
	leaf text;
BEGIN
	EXECUTE format('INSERT INTO t_%1$s_%2$s VALUES (%3$s) RETURNING tableoid::regclass::text',
				   tree, am, k) INTO leaf;
	leaf := 's' || substr(leaf, 2);
	IF leaf LIKE 's\_r\_%\_c_' THEN
		leaf := substr(leaf, 1, length(leaf) - 1);
	END IF;
	RETURN leaf::regclass;
END $$;

SELECT make_trees(am) FROM unnest(ARRAY['bcms', 'bloom_filter', 'quotient_filter']) am;

-- Keys 0..70 (0 and 61..70 never inserted) on each parent against the
-- partition PostgreSQL routes them to (trees h, l, r) or every partition
-- combined (tree x): no key differs.
SELECT am, tree, count(*) AS keys,
	   count(*) FILTER (WHERE answer(am, format('s_%s_%s', tree, am)::regclass, k) IS DISTINCT FROM
			CASE tree WHEN 'x' THEN combined(am, format('s_x_%s', am)::regclass, k)
			ELSE combined(am, holder(am, tree, k), k) END) AS differ
FROM unnest(ARRAY['bcms', 'bloom_filter', 'quotient_filter']) am,
	 unnest(ARRAY['h', 'l', 'r', 'x']) tree, generate_series(0, 70) k
GROUP BY am, tree ORDER BY am, tree;

-- what the answers are: key 12 was inserted 6 times, 70 never
SELECT bcms_estimate('s_h_bcms', 12) AS h, bcms_estimate('s_l_bcms', 12) AS l,
	   bcms_estimate('s_r_bcms', 12) AS r, bcms_estimate('s_x_bcms', 12) AS x,
	   bcms_estimate('s_r_bcms', 70) AS absent,
	   bcms_estimate('s_r_bcms', 33::int8) AS int8_key;
SELECT bloom_contains('s_l_bloom_filter', 12) AS l,
	   bloom_contains('s_r_bloom_filter', 45) AS r_expression,
	   qf_count('s_r_quotient_filter', 34) AS r_sub, qf_count('s_x_quotient_filter', 12) AS x,
	   qf_contains('s_h_quotient_filter', 70) AS absent;

-- A partition key that is not the structure's key: a bcms and a quotient
-- filter of (key, weight or count) partitioned by the weight; the same key
-- in several partitions adds up.
CREATE TABLE w_bcms (k text, n int) PARTITION BY RANGE (n);
CREATE TABLE w_bcms_small PARTITION OF w_bcms FOR VALUES FROM (MINVALUE) TO (10) USING bcms;
CREATE TABLE w_bcms_large PARTITION OF w_bcms FOR VALUES FROM (10) TO (MAXVALUE) USING bcms;
INSERT INTO w_bcms VALUES ('a', 1), ('a', 2), ('a', 100), ('b', 5);
CREATE TABLE w_qf (k text, n int) PARTITION BY LIST (n);
CREATE TABLE w_qf_1 PARTITION OF w_qf FOR VALUES IN (1) USING quotient_filter;
CREATE TABLE w_qf_2 PARTITION OF w_qf DEFAULT USING cascade_filter;
INSERT INTO w_qf VALUES ('a', 1), ('a', 3), ('b', 3);
SELECT bcms_estimate('w_bcms', 'a') AS a, bcms_estimate('w_bcms_small', 'a') AS a_small,
	   bcms_estimate('w_bcms_large', 'a') AS a_large, bcms_estimate('w_bcms', 'b') AS b,
	   qf_count('w_qf', 'a') AS qf_a, qf_count('w_qf', 'b') AS qf_b,
	   qf_contains('w_qf', 'c') AS qf_c;

-- Info functions on a parent: the partitions' counters summed, the
-- parameters they share, the false-positive rate of their OR.
SELECT i.items = (SELECT sum(j.items) FROM pg_partition_tree('s_h_bcms') t, bcms_info(t.relid) j WHERE t.isleaf) AS items_summed,
	   i.total_weight, i.width = j.width AS same_width,
	   i.error_bound = (SELECT sum(j.error_bound) FROM pg_partition_tree('s_h_bcms') t, bcms_info(t.relid) j WHERE t.isleaf) AS bound_summed
FROM bcms_info('s_h_bcms') i, bcms_info('s_h_bcms_0') j;
SELECT i.items, i.mode, i.capacity = 3 * j.capacity AS capacity_summed,
	   abs(i.false_positive_rate - (1 - (SELECT exp(sum(ln(1 - j.false_positive_rate))) FROM pg_partition_tree('s_h_bloom_filter') t, bloom_info(t.relid) j WHERE t.isleaf))) < 1e-12 AS fp_of_or
FROM bloom_info('s_h_bloom_filter') i, bloom_info('s_h_bloom_filter_0') j;
-- quotient filter and cascade filter partitions: the access method differs
SELECT access_method, items, total_count FROM qf_info('w_qf');
-- a parent without partitions: sums 0, the rest NULL
CREATE TABLE empty_parent (k int) PARTITION BY HASH (k);
SELECT bcms_estimate('empty_parent', 1), (bcms_info('empty_parent')).items,
	   (bcms_info('empty_parent')).width;

-- A foreign table partition (a structure on another server) is accepted by
-- the DDL; the functions route around it, and refuse one that postgres_fdw
-- does not serve (TAP 027 reaches partitions on other servers).
CREATE FOREIGN DATA WRAPPER regress_part_fdw;
CREATE SERVER regress_part_server FOREIGN DATA WRAPPER regress_part_fdw;
CREATE TABLE f_bcms (k int) PARTITION BY RANGE (k);
CREATE TABLE f_bcms_local PARTITION OF f_bcms FOR VALUES FROM (0) TO (100) USING bcms;
CREATE FOREIGN TABLE f_bcms_remote PARTITION OF f_bcms FOR VALUES FROM (100) TO (200)
	SERVER regress_part_server;
INSERT INTO f_bcms VALUES (1), (1);
SELECT bcms_estimate('f_bcms', 1) AS routed_local;
SELECT bcms_estimate('f_bcms', 150);
SELECT (bcms_info('f_bcms')).items;

-- Refusals: a heap, or another kind of structure, among a parent's
-- partitions, created or attached (also below a sub-partition); a
-- function on a parent whose partition is not its kind.  The message once
-- in full, then each statement's SQLSTATE and message.
CREATE FUNCTION sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
\set VERBOSITY default
CREATE TABLE s_l_bcms_heap PARTITION OF s_l_bcms FOR VALUES IN (100);
\set VERBOSITY terse
CREATE TABLE loose_bloom (k int) USING bloom_filter;
CREATE TABLE heap_parent (k int) PARTITION BY LIST (k);
CREATE TABLE heap_parent_1 PARTITION OF heap_parent FOR VALUES IN (1);
SELECT stmt, sqlstate_of(stmt) FROM (VALUES
	('CREATE TABLE s_l_bcms_heap PARTITION OF s_l_bcms FOR VALUES IN (100)'),
	('CREATE TABLE s_l_bcms_bloom PARTITION OF s_l_bcms FOR VALUES IN (100) USING bloom_filter'),
	('CREATE TABLE s_l_bcms_qf PARTITION OF s_l_bcms FOR VALUES IN (100) USING quotient_filter'),
	('ALTER TABLE s_l_bcms ATTACH PARTITION loose_bloom FOR VALUES IN (100)'),
	('CREATE TABLE s_r_bcms_c2 PARTITION OF s_r_bcms_c FOR VALUES IN (-1)'),
	('CREATE TABLE heap_parent_2 PARTITION OF heap_parent FOR VALUES IN (2) USING bcms'),
	('CREATE TABLE w_qf_3 PARTITION OF w_qf FOR VALUES IN (3) USING buffered_quotient_filter'),
	('SELECT bcms_estimate(''heap_parent'', 1)'),
	('SELECT bloom_contains(''s_h_bcms'', 1)'),
	('SELECT (bloom_info(''s_h_bcms'')).items'),
	('SELECT bcms_estimate(''f_bcms'', 150)'),
	('SELECT bcms_estimate(''s_h_bcms'', ''x''::text)')) v(stmt);
DROP TABLE loose_bloom, w_qf_3;

-- Privileges and row-level security are the parent's, as for a query
-- through it: SELECT on the parent suffices; its policies refuse.
CREATE ROLE regress_part_reader;
GRANT SELECT ON s_h_bcms, s_x_quotient_filter, s_l_bloom_filter TO regress_part_reader;
SET ROLE regress_part_reader;
SELECT bcms_estimate('s_h_bcms', 12) AS h, qf_count('s_x_quotient_filter', 12) AS x,
	   bloom_contains('s_l_bloom_filter', 12) AS l, (bcms_info('s_h_bcms')).items;
SELECT bcms_estimate('s_h_bcms_0', 12);
SELECT bcms_estimate('s_l_bcms', 12);
RESET ROLE;
ALTER TABLE s_h_bcms ENABLE ROW LEVEL SECURITY;
CREATE POLICY p ON s_h_bcms USING (k < 10);
SET ROLE regress_part_reader;
SELECT bcms_estimate('s_h_bcms', 12);
SELECT (bcms_info('s_h_bcms')).items;
RESET ROLE;
DROP POLICY p ON s_h_bcms;
ALTER TABLE s_h_bcms DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON s_h_bcms, s_x_quotient_filter, s_l_bloom_filter FROM regress_part_reader;
DROP ROLE regress_part_reader;

-- DETACH keeps a partition's contents: it answers directly, the parent no
-- longer counts it (a key it held now falls to the default, empty of it);
-- ATTACH brings it back.
SELECT bcms_estimate('s_l_bcms', 12) AS before;
ALTER TABLE s_l_bcms DETACH PARTITION s_l_bcms_b;
SELECT bcms_estimate('s_l_bcms_b', 12) AS detached, bcms_estimate('s_l_bcms', 12) AS parent;
ALTER TABLE s_l_bcms ATTACH PARTITION s_l_bcms_b FOR VALUES IN (11, 12, 13, 14, 15, 16, 17, 18, 19, 20);
SELECT bcms_estimate('s_l_bcms', 12) AS attached;

-- lert_count and lert_reported on a parent: a lert partitioned by its key
-- reads the partition that holds the key (each key reported once, there);
-- partitioned by an expression of the key, the partitions' exact counts
-- add up and a report in any of them counts
SET streamsketch.background_consolidation = off;
CREATE TABLE s_h_lert (key int8) PARTITION BY HASH (key);
CREATE TABLE s_h_lert_0 PARTITION OF s_h_lert FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING lert;
CREATE TABLE s_h_lert_1 PARTITION OF s_h_lert FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING lert;
CREATE TABLE s_x_lert (key int8) PARTITION BY LIST ((key % 2));
CREATE TABLE s_x_lert_0 PARTITION OF s_x_lert FOR VALUES IN (0) USING lert;
CREATE TABLE s_x_lert_1 PARTITION OF s_x_lert FOR VALUES IN (1) USING lert;
INSERT INTO s_h_lert SELECT g % 40 FROM generate_series(1, 1000) g;
INSERT INTO s_x_lert SELECT g % 40 FROM generate_series(1, 1000) g;
SELECT lert_flush('s_h_lert_0') >= 0 AS flushed, lert_flush('s_h_lert_1') >= 0 AS flushed,
	lert_flush('s_x_lert_0') >= 0 AS flushed, lert_flush('s_x_lert_1') >= 0 AS flushed;
-- every key: the parent's answer against the partition that holds it
-- (PostgreSQL's own hash routing: satisfies_hash_partition)
SELECT count(*) FILTER (WHERE lert_count('s_h_lert', k) <> lert_count(h, k)) AS count_differences,
	count(*) FILTER (WHERE lert_reported('s_h_lert', k) <> lert_reported(h, k)) AS reported_differences,
	sum(lert_count('s_h_lert', k)) AS observations,
	count(*) FILTER (WHERE lert_reported('s_h_lert', k)) AS reported
FROM (SELECT k, CASE WHEN satisfies_hash_partition('s_h_lert'::regclass, 2, 0, k)
				THEN 's_h_lert_0' ELSE 's_h_lert_1' END::regclass AS h
	  FROM generate_series(0::int8, 45::int8) k) s;
SELECT count(*) FILTER (WHERE lert_count('s_x_lert', k) <>
			lert_count('s_x_lert_0', k) + lert_count('s_x_lert_1', k)) AS count_differences,
	count(*) FILTER (WHERE lert_reported('s_x_lert', k) <>
			(lert_reported('s_x_lert_0', k) OR lert_reported('s_x_lert_1', k))) AS reported_differences,
	sum(lert_count('s_x_lert', k)) AS observations
FROM generate_series(0::int8, 45::int8) k;
RESET streamsketch.background_consolidation;
DROP TABLE s_h_lert, s_x_lert;

DROP TABLE s_h_bcms, s_l_bcms, s_r_bcms, s_x_bcms, t_h_bcms, t_l_bcms, t_r_bcms, t_x_bcms,
	s_h_bloom_filter, s_l_bloom_filter, s_r_bloom_filter, s_x_bloom_filter,
	t_h_bloom_filter, t_l_bloom_filter, t_r_bloom_filter, t_x_bloom_filter,
	s_h_quotient_filter, s_l_quotient_filter, s_r_quotient_filter, s_x_quotient_filter,
	t_h_quotient_filter, t_l_quotient_filter, t_r_quotient_filter, t_x_quotient_filter,
	w_bcms, w_qf, empty_parent, f_bcms, heap_parent;
DROP SERVER regress_part_server;
DROP FOREIGN DATA WRAPPER regress_part_fdw;
DROP FUNCTION make_trees(text), answer(text, regclass, int),
	combined(text, regclass, int), holder(text, text, int), sqlstate_of(text);
