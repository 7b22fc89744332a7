-- cbt: plain SQL key predicates read groups by their keys (Custom Scan
-- (cbt lookup)); each answer is compared with the scan's, the lookup scan
-- turned off
SET client_min_messages = warning;
SET streamsketch.background_consolidation = off;
-- the tables are small: a scan would be cheaper, but the paths are tested
SET enable_seqscan = off;

SELECT cbt_create('cp_views', group_by => 'url text',
    aggregates => 'count(*) AS hits, sum(bytes::bigint) AS total');
INSERT INTO cp_views (url, bytes)
SELECT 'u' || (i % 50), i FROM generate_series(1, 1000) i;
INSERT INTO cp_views (url, bytes) VALUES (NULL, 5), ('U1', 7);
SELECT cbt_create('cp_multi', group_by => 'region text, day int, big bigint',
    aggregates => 'count(*) AS n, max(v::int) AS top');
INSERT INTO cp_multi (region, day, big, v)
SELECT 'r' || (i % 3), i % 7, i % 5, i FROM generate_series(1, 300) i;

\i sql/include/lookup_check.sql

-- equality with a constant
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = 'u42'$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE 'u7' = url$$);
SELECT lookup_check($$SELECT hits FROM cp_views WHERE url = 'nope'$$);
SELECT lookup_check($$SELECT tableoid::regclass, url FROM cp_views WHERE url = 'u1'$$);
-- another column's qual filters the group found
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = 'u42' AND hits > 100$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = 'u42' AND hits = 20$$);
-- IN lists and = ANY (array), duplicates and NULLs in them
SELECT lookup_check($$SELECT * FROM cp_views WHERE url IN ('u1', 'u2', 'u1', 'zz')$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = ANY (ARRAY['u3', NULL, 'u4'])$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = ANY ('{}'::text[])$$);
-- NULL keys match nothing (= NULL), as in the scan
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = NULL$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url IS NULL$$);
-- multi-column keys, int against bigint both ways
SELECT lookup_check($$SELECT * FROM cp_multi WHERE region = 'r1' AND day = 3 AND big = 2$$);
SELECT lookup_check($$SELECT * FROM cp_multi WHERE region = 'r1' AND day = 3::bigint AND big = 2::smallint$$);
SELECT lookup_check($$SELECT * FROM cp_multi WHERE region IN ('r0', 'r2') AND day = 1 AND big = ANY ('{1,2,3}')$$);
-- one key missing: the scan
SELECT lookup_check($$SELECT * FROM cp_multi WHERE region = 'r1' AND day = 3$$);

-- the path does not apply
SELECT lookup_check($$SELECT * FROM cp_views WHERE url > 'u8'$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE hits = 21$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = 'u1' OR url = 'u2'$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = 'u1' OR hits = 21$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = url || '' AND hits < 20$$);

-- a text key with a non-default collation
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = 'u5' COLLATE "C"$$);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = 'u5' COLLATE "POSIX"$$);
SELECT cbt_create('cp_coll', group_by => 'name text COLLATE "C"',
    aggregates => 'count(*) AS n');
INSERT INTO cp_coll (name) VALUES ('a'), ('a'), ('B'), ('b');
SELECT lookup_check($$SELECT * FROM cp_coll WHERE name = 'a'$$);
SELECT lookup_check($$SELECT * FROM cp_coll WHERE name IN ('b', 'B' COLLATE "default")$$);

-- prepared, with a generic plan
SET plan_cache_mode = force_generic_plan;
PREPARE cp_p(text) AS SELECT url, hits, total FROM cp_views WHERE url = $1;
EXPLAIN (COSTS OFF) EXECUTE cp_p('u9');
EXECUTE cp_p('u9');
EXECUTE cp_p('u10');
EXECUTE cp_p(NULL);
PREPARE cp_q(int, bigint) AS SELECT * FROM cp_multi WHERE region = 'r2' AND day = $1 AND big = $2;
EXPLAIN (COSTS OFF) EXECUTE cp_q(2, 4);
EXECUTE cp_q(2, 4);
SET streamsketch.enable_lookup_scan = off;
EXECUTE cp_q(2, 4);
RESET streamsketch.enable_lookup_scan;
PREPARE cp_a(text[]) AS SELECT url, hits FROM cp_views WHERE url = ANY ($1);
EXPLAIN (COSTS OFF) EXECUTE cp_a('{u3,u4}');
EXECUTE cp_a('{u3,u4,u3,NULL}');
EXECUTE cp_a(NULL);
RESET plan_cache_mode;
-- date against timestamp: the cast could fail where the comparison does not
SELECT cbt_create('cp_days', group_by => 'ts timestamp', aggregates => 'count(*) AS n');
INSERT INTO cp_days (ts) VALUES ('2026-01-01'), ('2026-01-01'), ('2026-01-02 10:00');
SELECT lookup_check($$SELECT * FROM cp_days WHERE ts = '2026-01-01'::date$$);
SELECT lookup_check($$SELECT * FROM cp_days WHERE ts = '5000000-01-01'::date$$);
SELECT lookup_check($$SELECT * FROM cp_days WHERE ts = '2026-01-01'$$);

-- a join: the outer VALUES probe the groups one by one
SELECT lookup_check($$SELECT v.column1, c.hits FROM (VALUES ('u1'), ('u2'), ('none'), ('u1')) v LEFT JOIN cp_views c ON c.url = v.column1$$);
SELECT lookup_check($$SELECT v.d, c.n FROM (VALUES (1, 2), (3, 4)) v(d, b) JOIN cp_multi c ON c.day = v.d AND c.big = v.b AND c.region = 'r0'$$);

-- the transaction's own rows, not committed yet
BEGIN;
INSERT INTO cp_views (url, bytes) VALUES ('u42', 1000), ('fresh', 1);
SELECT lookup_check($$SELECT * FROM cp_views WHERE url IN ('u42', 'fresh')$$);
ROLLBACK;

-- privileges and row-level security, as the scan's
CREATE ROLE cp_reader;
CREATE ROLE cp_stranger;
GRANT SELECT ON cp_views TO cp_reader;
SET ROLE cp_stranger;
SELECT * FROM cp_views WHERE url = 'u42';
RESET ROLE;
SET ROLE cp_reader;
SELECT lookup_check($$SELECT * FROM cp_views WHERE url = 'u42'$$);
RESET ROLE;
ALTER TABLE cp_views ENABLE ROW LEVEL SECURITY;
CREATE POLICY cp_some ON cp_views FOR SELECT USING (url LIKE 'u1%');
SET ROLE cp_reader;
SELECT lookup_check($$SELECT * FROM cp_views WHERE url IN ('u1', 'u2', 'u13')$$);
SET row_security = off;
SELECT * FROM cp_views WHERE url = 'u13';
RESET row_security;
RESET ROLE;

DROP POLICY cp_some ON cp_views;
DROP TABLE cp_views, cp_multi, cp_coll, cp_days;
DROP FUNCTION lookup_check(text);
DROP ROLE cp_reader;
DROP ROLE cp_stranger;
