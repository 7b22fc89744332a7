--
-- qfilter: the in-memory counting quotient filter type and its aggregates
--

-- Run a statement that must fail and show its SQLSTATE, message, detail
-- and hint (but no source locations, which change with every edit).
CREATE FUNCTION qft_error(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	EXECUTE query;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg
		|| coalesce(E'\nDETAIL: ' || nullif(det, ''), '')
		|| coalesce(E'\nHINT: ' || nullif(hnt, ''), '');
END
$$;

-- (JIT compilation would only add time to the large queries below.)
SET jit = off;

-- Did the plan of a query launch parallel workers?
CREATE FUNCTION qft_workers_launched(query text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	plan json;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || query INTO plan;
	RETURN (plan::jsonb #> '{0,Plan,Plans,0,Workers Launched}')::int > 0;
END
$$;

--
-- A small filter: fp_rate 0.01 needs 7 remainder bits (0.95 * 2^-7 <=
-- 0.01), and remainders that short are sized to the load 0.97 where the
-- rate holds at it (0.97 * 2^-7 <= 0.01): capacity 100 needs 104 home
-- slots, so the fingerprints are below 104 * 2^7 = 13 * 2^10 (14 bits).
-- An 8136-byte area could hold 6272 home slots of 7-bit remainders; this
-- one uses 104 and makes the rest slack.  The text form lists the
-- parameters and the area in base64, zero runs compressed.
--
SELECT qfilter_agg(x, 100, 0.01) FROM (VALUES ('a'), ('b'), ('a')) v(x);
SELECT * FROM qfilter_info((SELECT qfilter_agg(x, 100, 0.01)
							FROM (VALUES ('a'), ('b'), ('a')) v(x)));

-- geometry for a few parameters (filled with up to 100 keys)
SELECT p.cap, p.fp, i.rbits, i.slot_bits, i.fingerprint_bits, i.pages,
	   i.current_capacity, i.bytes,
	   CASE WHEN i.rbits <= 7 THEN 0.97 ELSE 0.95 END * 2 ^ (-i.rbits) <= p.fp
	   AS fp_at_capacity_ok
FROM (VALUES (1, 0.5), (1000, 0.01), (10000, 0.01), (1000000, 0.01),
			 (1000000, 0.0001), (100000, 1e-6), (10, 1e-15), (3973, 0.01),
			 (3974, 0.01)) AS p(cap, fp),
	 LATERAL (SELECT qfilter_agg(g, p.cap, p.fp) AS f
			  FROM generate_series(1, least(p.cap, 100)) g) a,
	 LATERAL qfilter_info(a.f) i;

--
-- Lookups.  Without fingerprint collisions counts are exact.
--
CREATE TABLE qft_small AS
	SELECT qfilter_agg(k, 1000, 0.001) AS f
	FROM (VALUES (1), (2), (2), (3), (3), (3), (NULL), (NULL)) v(k);
SELECT k, qfilter_contains(f, k), qfilter_count(f, k)
FROM qft_small, generate_series(0, 4) k;
SELECT (qfilter_info(f)).total, (qfilter_info(f)).items FROM qft_small;	-- NULL keys are skipped
SELECT qfilter_contains(f, NULL::int), qfilter_count(f, NULL::int) FROM qft_small;	-- strict

-- Keys of another integer type are converted; others must be cast.
SELECT qfilter_count(f, 3::int2) AS int2, qfilter_count(f, 3::int8) AS int8,
	   qfilter_contains(f, 2::int8) AS contains_int8
FROM qft_small;
SELECT qft_error('SELECT qfilter_contains(f, 5000000000::int8) FROM qft_small');
SELECT qft_error('SELECT qfilter_count(f, ''3''::text) FROM qft_small');
SELECT qft_error('SELECT qfilter_contains(f, 3.0) FROM qft_small');

-- A bare literal is text; varchar keys match text keys (same binary form).
SELECT qfilter_count(qfilter_agg(x, 10, 0.01), 'b') AS literal,
	   qfilter_contains(qfilter_agg(x, 10, 0.01), 'b'::varchar) AS as_varchar,
	   qfilter_contains(qfilter_agg(x, 10, 0.01), 'c') AS absent
FROM (VALUES ('a'::text), ('b'), ('b')) v(x);

-- Large and toasted keys hash by their detoasted bytes.
SELECT qfilter_count(qfilter_agg(x, 10, 0.01), repeat('xyz', 10000)) AS long_key
FROM (SELECT repeat('xyz', 10000) UNION ALL SELECT 'short') v(x);

--
-- Counting form
--
SELECT qfilter_count(f, 'a') AS a, qfilter_count(f, 'b') AS b,
	   qfilter_count(f, 'c') AS c, (qfilter_info(f)).total,
	   (qfilter_info(f)).items
FROM (SELECT qfilter_agg(k, n, 100, 0.01) AS f
	  FROM (VALUES ('a', 5), ('b', 2), ('a', 10), ('c', NULL), (NULL, 7),
				   ('c', 0)) v(k, n)) q;
-- only zero counts: an empty filter, not NULL
SELECT (qfilter_info(qfilter_agg(1, 0, 10, 0.1))).items;
-- counts go up to 2^64-1 and saturate there; bigint results are capped
SELECT qfilter_count(f, 1) AS count_1, qfilter_count(f, 2) AS count_2,
	   (qfilter_info(f)).total, f::text::qfilter::text = f::text AS text_round_trip
FROM (SELECT qfilter_agg(k, 9223372036854775807, 10, 0.1) AS f
	  FROM (VALUES (1), (1), (1), (2)) v(k)) q;
SELECT qft_error('SELECT qfilter_agg(k, -1, 10, 0.1) FROM (VALUES (1)) v(k)');

--
-- No contributing row: NULL
--
SELECT qfilter_agg(k, 10, 0.1) IS NULL AS no_rows FROM generate_series(1, 0) k;
SELECT qfilter_agg(NULL::int, 10, 0.1) IS NULL AS null_keys;
SELECT qfilter_agg(1, NULL::bigint, 10, 0.1) IS NULL AS null_count;
SELECT qfilter_union_agg(NULL::qfilter) IS NULL AS null_filters;

--
-- Parameter errors
--
SELECT qft_error('SELECT qfilter_agg(1, 0, 0.1)');
SELECT qft_error('SELECT qfilter_agg(1, -5, 0.1)');
SELECT qft_error('SELECT qfilter_agg(1, 10, 0)');
SELECT qft_error('SELECT qfilter_agg(1, 10, 1)');
SELECT qft_error('SELECT qfilter_agg(1, 10, -0.5)');
SELECT qft_error('SELECT qfilter_agg(1, 10, ''NaN''::float8)');
SELECT qft_error('SELECT qfilter_agg(1, 1000, 1e-17)');
SELECT qft_error('SELECT qfilter_agg(1, 50000000, 1e-14)');
SELECT qft_error('SELECT qfilter_agg(1, 400000000, 0.01)');
SELECT qft_error('SELECT qfilter_agg(1, 9223372036854775807, 0.5)');
SELECT qft_error('SELECT qfilter_agg(1, NULL, 0.1)');
SELECT qft_error('SELECT qfilter_agg(1, 2, 10, NULL)');
SELECT qft_error(
	'SELECT qfilter_agg(k, 10, CASE WHEN k < 5 THEN 0.1 ELSE 0.2 END)
	 FROM generate_series(1, 10) k');
SELECT qft_error(
	'SELECT qfilter_agg(k, CASE WHEN k < 5 THEN 10 ELSE 11 END, 0.1)
	 FROM generate_series(1, 10) k');
SELECT qft_error('SELECT qfilter_agg(ROW(1, 2), 10, 0.1)');
SELECT qft_error('SELECT qfilter_agg(ARRAY[ROW(1, 2)], 10, 0.1)');
-- but arrays of scalars are fine
SELECT qfilter_count(qfilter_agg(a, 10, 0.1), ARRAY[1, 2])
FROM (VALUES (ARRAY[1, 2]), (ARRAY[2, 1]), (ARRAY[1, 2])) v(a);

--
-- A million keys: no false negatives, and the false-positive rate on a
-- million absent keys is the theoretical items / 2^fingerprint_bits.
-- (The filter is stored, hence toasted: lookups detoast it once.)
--
CREATE TABLE qft_keys AS
	SELECT g AS k,
		   CASE WHEN g % 11 <> 0 THEN g END AS nk,	-- some NULL keys
		   g % 3 AS n, g % 4 AS part
	FROM generate_series(1, 1000000) g;
VACUUM ANALYZE qft_keys;
CREATE TABLE qft_big AS
	SELECT qfilter_agg(k, 1000000, 0.01) AS f FROM qft_keys;
SELECT capacity, fp_rate, fingerprint_bits, rbits, pages, total,
	   items > 990000 AS most_distinct, items <= current_capacity AS under_max_load
FROM qft_big, qfilter_info(f);
SELECT count(*) FILTER (WHERE NOT qfilter_contains(f, k)) AS false_negatives,
	   count(*) FILTER (WHERE qfilter_count(f, k) < 1) AS zero_counts
FROM qft_big, qft_keys;
SELECT fp <= 0.01 AS within_requested,
	   fp BETWEEN theory / 1.5 AND theory * 1.5 AS within_theory
FROM (SELECT count(*) FILTER (WHERE qfilter_contains(f, g))::float8 / 1000000 AS fp
	  FROM qft_big, generate_series(1000001, 2000000) g) q,
	 (SELECT (qfilter_info(f)).false_positive_rate AS theory FROM qft_big) t;
-- the same at the maximum load of 95% (capacity = 256 areas * 4096 * 0.95)
-- and a smaller false-positive rate, with lookups of a value that is not
-- toasted
WITH a AS MATERIALIZED (
		SELECT qfilter_agg(g, 996147, 0.001) AS f
		FROM generate_series(1, 996147) g),
	c AS (
		SELECT count(*) FILTER (WHERE g > 996147 AND qfilter_contains(f, g))::float8
				   / 1000000 AS fp,
			   count(*) FILTER (WHERE g <= 996147 AND NOT qfilter_contains(f, g))
				   AS fn
		FROM a, generate_series(1, 1996147) g)
SELECT i.pages, i.load > 0.94 AS full_load,
	   c.fp <= 0.001 AS within_requested,
	   c.fp BETWEEN i.false_positive_rate / 1.5 AND i.false_positive_rate * 1.5
		   AS within_theory,
	   c.fn AS false_negatives
FROM a, c, LATERAL qfilter_info(a.f) i;

--
-- Exact counts on a collision-free workload: 10^4 keys with counts
-- 1..100, with 20-bit remainders and 34-bit fingerprints (a fingerprint
-- collision among 10^4 keys has probability about 5 * 10^7 / 2^34)
--
CREATE TABLE qft_counts AS
	SELECT qfilter_agg(k, k % 100 + 1, 10000, 1e-6) AS f
	FROM generate_series(1, 10000) k;
SELECT rbits, items, total = (SELECT sum(k % 100 + 1) FROM generate_series(1, 10000) k)
	   AS total_ok
FROM qft_counts, qfilter_info(f);
SELECT count(*) FILTER (WHERE qfilter_count(f, k) <> k % 100 + 1) AS wrong_counts
FROM qft_counts, generate_series(1, 10000) k;
-- the same counts from repeated rows instead of counts
SELECT f::text = (SELECT qfilter_agg(k, 10000, 1e-6)::text
				  FROM generate_series(1, 10000) k,
					   LATERAL generate_series(1, k % 100 + 1)) AS same_as_rows
FROM qft_counts;

--
-- qfilter_remove removes exactly the given number of copies
--
SELECT qfilter_count(f, 42) AS before,
	   qfilter_count(qfilter_remove(f, 42), 42) AS minus_one,
	   qfilter_count(qfilter_remove(f, 42, 40), 42) AS minus_40,
	   qfilter_count(qfilter_remove(f, 42, 1000), 42) AS all_removed,
	   qfilter_contains(qfilter_remove(f, 42, 1000), 42) AS contained,
	   qfilter_remove(f, 42, 0)::text = f::text AS zero_is_noop,
	   qfilter_remove(f, -42)::text = f::text AS absent_is_noop,
	   (qfilter_info(qfilter_remove(f, 42, 1000))).total
		   = (qfilter_info(f)).total - 43 AS total_ok,
	   (qfilter_info(qfilter_remove(f, 42, 1000))).items
		   = (qfilter_info(f)).items - 1 AS items_ok
FROM qft_counts;
SELECT qfilter_remove(f, NULL::int) IS NULL AS strict FROM qft_counts;
SELECT qft_error('SELECT qfilter_remove(f, 42, -1) FROM qft_counts');
SELECT qft_error('SELECT qfilter_remove(f, ''x''::text) FROM qft_counts');
-- removing every copy of every key gives back the empty filter (of the
-- size the counts' digit slots grew it to: once, from 20 to 19 remainder
-- bits)
CREATE FUNCTION qft_remove_all(f qfilter, lo int, hi int, counted bool)
RETURNS qfilter LANGUAGE plpgsql AS $$
BEGIN
	FOR k IN lo .. hi LOOP
		IF counted THEN
			f := qfilter_remove(f, k, k % 100 + 1);
		ELSE
			f := qfilter_remove(f, k);
		END IF;
	END LOOP;
	RETURN f;
END
$$;
SELECT qft_remove_all(f, 1, 10000, true)::text
		   = (SELECT qfilter_resize(qfilter_agg(k, 0, 10000, 1e-6))::text
			  FROM generate_series(1, 10000) k) AS empty_again
FROM qft_counts;
-- remove 5000 of 100000 keys: no false negatives for the others, and the
-- result equals the filter of the remaining keys byte for byte
CREATE TABLE qft_removed AS
	SELECT qft_remove_all(qfilter_agg(g, 100000, 0.01), 1, 5000, false) AS f
	FROM generate_series(1, 100000) g;
SELECT count(*) FILTER (WHERE NOT qfilter_contains(f, g)) AS false_negatives
FROM qft_removed, generate_series(5001, 100000) g;
SELECT f::text = (SELECT qfilter_agg(g, 100000, 0.01)::text
				  FROM generate_series(5001, 100000) g) AS same_as_rest
FROM qft_removed;

--
-- qfilter_resize: twice the areas, one remainder bit less, same
-- fingerprints, counts and false-positive rate
--
SELECT a.pages, b.pages AS resized_pages, a.rbits, b.rbits AS resized_rbits,
	   a.fingerprint_bits = b.fingerprint_bits AS same_fingerprints,
	   a.items = b.items AND a.total = b.total AS same_contents,
	   a.false_positive_rate = b.false_positive_rate AS same_fp_rate,
	   abs(b.current_capacity - 2 * a.current_capacity) <= 1 AS doubled
FROM qft_counts, qfilter_info(f) a, qfilter_info(qfilter_resize(f)) b;
SELECT count(*) FILTER (WHERE qfilter_count(r, k) <> k % 100 + 1) AS wrong_counts
FROM (SELECT qfilter_resize(qfilter_resize(f)) AS r FROM qft_counts) q,
	 generate_series(1, 10000) k;
WITH q AS MATERIALIZED (SELECT qfilter_resize(f) AS r FROM qft_big)
SELECT count(*) FILTER (WHERE NOT qfilter_contains(r, k)) AS false_negatives
FROM q, qft_keys;
-- down to 1-bit remainders (fp_rate 0.1 gives 4), then no further
SELECT (qfilter_info(f)).rbits, (qfilter_info(f)).slot_bits,
	   qfilter_contains(f, 1) AS contains
FROM (SELECT qfilter_resize(qfilter_resize(qfilter_resize(qfilter_agg(1, 1, 0.1))))
	  AS f) q;
SELECT qft_error('SELECT qfilter_resize(qfilter_resize(qfilter_resize(
					  qfilter_resize(qfilter_agg(1, 1, 0.1)))))');

--
-- Growth: capacity is a hint.  A filter sized for 1000 keys takes 10^5
-- and grows (keeping its fingerprints, whose false-positive rate rises
-- with the keys); no key is lost.
--
SELECT i.rbits, i.pages, i.fingerprint_bits, i.items, i.false_positive_rate > 0.01
	   AS beyond_requested_rate,
	   (SELECT count(*) FILTER (WHERE NOT qfilter_contains(f, g))
		FROM generate_series(1, 50000) g) AS false_negatives
FROM (SELECT qfilter_agg(g, 1000, 0.01) AS f FROM generate_series(1, 50000) g) q,
	 LATERAL qfilter_info(f) i;
-- until the fingerprints run out of remainder bits
SELECT qft_error('SELECT qfilter_agg(g, 1, 0.4) FROM generate_series(1, 100000) g');
-- large counts need more counter slots and grow a filter too
SELECT i.pages, i.rbits, i.used_slots / i.items AS slots_per_key,
	   qfilter_count(f, 7) AS count_7
FROM (SELECT qfilter_agg(g, 1000000000000, 3891, 0.01) AS f
	  FROM generate_series(1, 3891) g) q,
	 LATERAL qfilter_info(f) i;

--
-- qfilter_union and qfilter_union_agg: the union of the filters of two
-- streams is the filter of the concatenated stream, byte for byte
--
CREATE TABLE qft_parts AS
	SELECT part, qfilter_agg(nk, 1000000, 0.01) AS f
	FROM qft_keys GROUP BY part;
SELECT qfilter_union_agg(f)::text = (SELECT qfilter_agg(nk, 1000000, 0.01)::text
									 FROM qft_keys) AS same
FROM qft_parts;
SELECT qfilter_union(a.f, b.f)::text = qfilter_union(b.f, a.f)::text AS commutes,
	   qfilter_union(a.f, b.f)::text
		   = (SELECT qfilter_agg(nk, 1000000, 0.01)::text
			  FROM qft_keys WHERE part IN (0, 3)) AS same
FROM qft_parts a, qft_parts b
WHERE a.part = 0 AND b.part = 3;
SELECT qfilter_union(f, NULL) IS NULL AS strict FROM qft_parts WHERE part = 0;
SELECT qfilter_count(qfilter_union_agg(f), 12)
FROM (SELECT f FROM qft_parts UNION ALL SELECT NULL) q;
-- counts add up; a filter unioned with itself has every count doubled
SELECT qfilter_count(qfilter_union(f, f), 42) AS doubled,
	   (qfilter_info(qfilter_union(f, f))).total = 2 * (qfilter_info(f)).total
		   AS total_doubled
FROM qft_counts;
-- partial filters that grew differently (one from 1000 to 64000 keys,
-- one not at all) still union to the filter of the whole stream
SELECT (qfilter_info(a)).pages AS grown_pages, (qfilter_info(b)).pages AS small_pages,
	   qfilter_union(a, b)::text = w::text AS same,
	   qfilter_union(b, a)::text = w::text AS same_reversed
FROM (SELECT qfilter_agg(g, 1000, 0.01) FILTER (WHERE g <= 64000) AS a,
			 qfilter_agg(g, 1000, 0.01) FILTER (WHERE g > 64000) AS b,
			 qfilter_agg(g, 1000, 0.01) AS w
	  FROM generate_series(1, 64500) g) q;
-- a resized filter unions with an unresized one
SELECT qfilter_union(qfilter_resize(a), b)::text
		   = qfilter_resize(qfilter_union(a, b))::text AS same,
	   (qfilter_info(qfilter_union(a, qfilter_resize(b)))).pages
FROM (SELECT qfilter_agg(g, 100000, 0.01) FILTER (WHERE g % 2 = 0) AS a,
			 qfilter_agg(g, 100000, 0.01) FILTER (WHERE g % 2 = 1) AS b
	  FROM generate_series(1, 100000) g) q;
-- across a change of the area layout: 12-bit remainders give 2048 home
-- slots per area, 11-bit ones 4096, so resizing a one-area filter of 2^11
-- home slots lays its area out anew (with more home slots) instead of
-- splitting it
SELECT a.rbits, a.slot_bits, a.pages, r.rbits AS resized_rbits,
	   r.slot_bits AS resized_slot_bits, r.pages AS resized_pages,
	   a.items = r.items AND a.total = r.total AS same_contents,
	   (SELECT count(*) FILTER (WHERE NOT qfilter_contains(qfilter_resize(f), g))
		FROM generate_series(1, 1500) g) AS false_negatives,
	   qfilter_union(qfilter_resize(f), f2)::text
		   = qfilter_resize(qfilter_union(f, f2))::text AS union_same,
	   qfilter_union(f2, qfilter_resize(f))::text
		   = qfilter_union(qfilter_resize(f), f2)::text AS commutes
FROM (SELECT qfilter_agg(g, 1000, 0.0003) FILTER (WHERE g <= 1500) AS f,
			 qfilter_agg(g, 1000, 0.0003) FILTER (WHERE g > 1500) AS f2
	  FROM generate_series(1, 1800) g) q,
	 LATERAL qfilter_info(f) a,
	 LATERAL qfilter_info(qfilter_resize(f)) r;
SELECT qft_error(
	'SELECT qfilter_union(qfilter_agg(1, 1000, 0.01), qfilter_agg(1, 1000, 0.001))');
SELECT qft_error(
	'SELECT qfilter_union(qfilter_agg(1, 1000, 0.01), qfilter_agg(1, 100000, 0.01))');
SELECT qft_error(
	'SELECT qfilter_union(qfilter_agg(1, 10, 0.1), qfilter_agg(1::bigint, 10, 0.1))');
SELECT qft_error(
	'SELECT qfilter_union_agg(f) FROM (SELECT qfilter_agg(1, 10, 0.1)
	 UNION ALL SELECT qfilter_agg(1, 10, 0.01)) v(f)');
-- a union that does not fit grows
SELECT (qfilter_info(a)).pages, (qfilter_info(qfilter_union(a, b))).pages AS union_pages,
	   qfilter_union(a, b)::text = w::text AS same
FROM (SELECT qfilter_agg(g, 3891, 0.01) FILTER (WHERE g <= 3800) AS a,
			 qfilter_agg(g, 3891, 0.01) FILTER (WHERE g > 3800) AS b,
			 qfilter_agg(g, 3891, 0.01) AS w
	  FROM generate_series(1, 7600) g) q;

--
-- Text I/O
--
SELECT f::text::qfilter::text = f::text AS round_trip FROM qft_small;
SELECT f::text AS small FROM qft_small \gset
SELECT :'small';
-- a filter without a key type (written by hand) looks up any key type,
-- and unions with a typed one
SELECT qfilter_count(c, 3) AS int_key, qfilter_contains(c, 'x') AS text_key,
	   (qfilter_info(c)).key_type,
	   (qfilter_info(qfilter_union(c, f))).key_type AS union_key_type
FROM (SELECT replace(:'small', ' type="integer"', '')::qfilter AS c) q, qft_small;
-- a key type with quotes and spaces in its name survives the round trip
CREATE TYPE "odd ""key"" type" AS ENUM ('x', 'y');
-- (enum values hash by OID, which differs between runs: no areas shown)
SELECT split_part(f::text, ' areas=', 1) AS header,
	   f::text::qfilter::text = f::text AS round_trip
FROM (SELECT qfilter_agg(e, 10, 0.5) AS f
	  FROM (VALUES ('x'::"odd ""key"" type")) v(e)) q;
-- a multi-area filter
SELECT f::text::qfilter::text = f::text AS round_trip,
	   length(f::text) <= (qfilter_info(f)).bytes * 4 / 3 + 300 AS bounded
FROM qft_counts;
-- bad input
SELECT qft_error('SELECT ''garbage''::qfilter');
SELECT qft_error('SELECT ''''::qfilter');
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'version=3', 'version=4')));
-- versions 1 and 2 have the earlier header (slot_bits and page_bits)
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'version=3', 'version=2')));
-- qft_small as earlier builds wrote it, in version 1 (areas of the earlier
-- layout, four metadata bit arrays) and version 2 (top-bit fingerprints):
-- read as version 3 values of the space 2^21 of their fingerprints, the
-- same value from both; looked up, grown and merged into a table sized to
-- its capacity (whose space is another, so each fingerprint adds the one
-- or two of the table's it covers); not united with a value of the space
-- of the current sizing
\set small_v1 'version=1 seed=1592598101 capacity=1000 fp_rate=0.001 rbits=10 slot_bits=11 page_bits=0 area_bytes=8136 total=6 type="integer" areas=UUZBMQsKAAAGCgAAAwAAAAUA.2.BgAA.19.AAAQ.23.EAAA.8.gAAA.161.ACAA.32.AQAA.161.IAAA.31.AAAB.161.AAAg.32.AAEA.325.SgoA.232.AMsC.90.AADAAQAA.1415.'
\set small_v2 'version=2 seed=1592598101 capacity=1000 fp_rate=0.001 rbits=10 slot_bits=11 page_bits=0 area_bytes=8136 total=6 type="integer" areas=UUZBMgAKAAB5CwAAAwAAAAUAAAAACAAABgAA.19.AAAQ.23.EAAA.8.gAAA.174.AAAg.32.AAEA.546.AEoK.232.AADLAgAA.90.wAEA.1570.'
SELECT split_part(:'small_v1'::qfilter::text, ' areas=', 1) AS v1_read,
	   :'small_v1'::qfilter::text = :'small_v2'::qfilter::text AS v1_is_v2,
	   (SELECT array_agg(qfilter_count(:'small_v1'::qfilter, k) ORDER BY k)
		FROM generate_series(0, 4) k) AS counts_v1,
	   (SELECT array_agg(qfilter_count(:'small_v2'::qfilter, k) ORDER BY k)
		FROM generate_series(0, 4) k) AS counts_v2,
	   (qfilter_info(:'small_v1'::qfilter)).items,
	   (qfilter_info(qfilter_resize(:'small_v2'::qfilter))).rbits AS resized_rbits,
	   qfilter_union(:'small_v1'::qfilter, :'small_v2'::qfilter)::text =
	   qfilter_union(:'small_v2'::qfilter, :'small_v2'::qfilter)::text AS union_same
FROM qft_small;
SELECT qft_error(format('SELECT qfilter_union(%L::qfilter, %L::qfilter)', :'small_v2', :'small'));
SELECT qf_create('qft_v1_target', 'int', capacity => 1000, fp_rate => 0.001);
SELECT qf_merge_value('qft_v1_target', :'small_v1'::qfilter);
SELECT k, qf_count('qft_v1_target', k) FROM generate_series(1, 3) k;
DROP TABLE qft_v1_target;
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'seed=', 'seed=-')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'seed=', 'seed=99999999999')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'capacity=1000', 'capacity=0')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'fp_rate=0.001', 'fp_rate=x')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'fp_rate=0.001', 'fp_rate=1')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'rbits=10', 'rbits=0')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'rbits=10', 'rbits=256')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'rbits=10', 'rbits=9')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'home_slots=1054', 'home_slots=16864')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'pages=1', 'pages=70000')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'space=527*2^11', 'space=527*2^13')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'space=527*2^11', 'space=526*2^11')));
SELECT qft_error(format('SELECT %L::qfilter', replace(replace(:'small', 'pages=1', 'pages=2'),
													   'space=527*2^11', 'space=527*2^12')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'area_bytes=1872', 'area_bytes=4096')));
-- the page-sized areas (8136 bytes) of earlier builds are read, checked
-- and trimmed: qft_small as they wrote it reads as qft_small
\set small_paged 'version=3 seed=1592598101 capacity=1000 fp_rate=0.001 rbits=10 space=527*2^11 home_slots=1054 pages=1 area_bytes=8136 total=6 type="integer" areas=UUZBMgAKAABbDwAAAwAAAAUAAAAeBAAABgAA.11.AQAA.11.AQAA.3.AAAC.191.AgAA.15.AAAE.483.uQoA.119.zAMA.46.8BoA.1816.'
SELECT :'small_paged'::qfilter::text = :'small' AS paged_read_trimmed,
	   qfilter_send(:'small_paged'::qfilter) = qfilter_send(f) AS paged_send_trimmed
FROM qft_small;
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small_paged', '.1816.', '.1815.AAAB')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'total=6', 'total=7')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'integer', 'no_such_type')));
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', '"integer"', '"integer')));
SELECT qft_error(format('SELECT %L::qfilter', :'small' || 'AAAA'));
SELECT qft_error(format('SELECT %L::qfilter', :'small' || ',.2720.'));
SELECT qft_error(format('SELECT %L::qfilter', :'small' || ' '));
SELECT qft_error(format('SELECT %L::qfilter', regexp_replace(:'small', '\.\d+\.$', '')));
SELECT qft_error(format('SELECT %L::qfilter', regexp_replace(:'small', '\.\d+\.$', '.9999999999999999999999.')));
SELECT qft_error(format('SELECT %L::qfilter', regexp_replace(:'small', '\.\d+\.$', '.0.')));
SELECT qft_error(format('SELECT %L::qfilter', regexp_replace(:'small', '\.\d+\.$', '.12')));
SELECT qft_error(format('SELECT %L::qfilter', regexp_replace(:'small', '\.(\d+)\.$', '.\1')));
SELECT qft_error(format('SELECT %L::qfilter', regexp_replace(:'small', 'areas=.', 'areas=!')));
SELECT qft_error(format('SELECT %L::qfilter',
						regexp_replace(:'small', '\.(\d+)\.$', '')
						|| '.' || (regexp_match(:'small', '\.(\d+)\.$'))[1]::int - 1
						|| '.AAA'));
-- damaged areas are caught by the full check: the magic number (here the
-- one of the earlier layout with four metadata bit arrays), the used
-- slot count in the area header (bytes 16-19), an occupied bit of an
-- empty slot (the byte at offset 59 is in the occupied bits; the slot now
-- holds remainder 0, so the item count no longer matches), and nonzero
-- bytes after the last slot (7-bit remainders and 124 home slots: the 192
-- slots of the 288-byte area leave its last 16 bytes unused)
SELECT qft_error(format('SELECT %L::qfilter', replace(:'small', 'areas=UUZBMg', 'areas=UUZBMQ')));
SELECT qft_error(format('SELECT %L::qfilter', regexp_replace(:'small', 'areas=(.{20})AAUA', 'areas=\1AAYA')));
SELECT qft_error(format('SELECT %L::qfilter', regexp_replace(:'small', 'areas=(.{32})BgAA\.11\.', 'areas=\1BgAA.10.AAAB')));
SELECT qfilter_agg(g, 120, 0.01)::text AS small7 FROM generate_series(1, 3) g \gset
SELECT qft_error(format('SELECT %L::qfilter', :'small7'));
SELECT qft_error(format('SELECT %L::qfilter',
						regexp_replace(:'small7', '\.(\d+)\.$', '')
						|| '.' || (regexp_match(:'small7', '\.(\d+)\.$'))[1]::int - 1
						|| '.AAAB'));

--
-- Binary I/O, through COPY (FORMAT binary) via a server-side file
--
SELECT length(qfilter_send(f)) AS send_bytes, (qfilter_info(f)).bytes FROM qft_small;
SELECT '/tmp/streamsketch_qfilter_regress_' || pg_backend_pid() || '.copy' AS copyfile
\gset
\set rmcmd 'rm -f ' :copyfile
CREATE TABLE qft_back (f qfilter);
COPY (SELECT f FROM qft_counts) TO :'copyfile' WITH (FORMAT binary);
COPY qft_back FROM :'copyfile' WITH (FORMAT binary);
SELECT b.f::text = c.f::text AS binary_round_trip FROM qft_back b, qft_counts c;
-- a filter without key type
TRUNCATE qft_back;
COPY (SELECT replace(:'small', ' type="integer"', '')::qfilter) TO :'copyfile' WITH (FORMAT binary);
COPY qft_back FROM :'copyfile' WITH (FORMAT binary);
SELECT (qfilter_info(f)).key_type IS NULL AS no_key_type, qfilter_count(f, 3)
FROM qft_back;
-- bad input: a bytea column's binary form is its raw bytes, so writing
-- altered qfilter_send() output and reading it as qfilter feeds them to
-- qfilter_recv
CREATE FUNCTION qft_recv(bytes bytea, copyfile text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('COPY (SELECT %L::bytea) TO %L WITH (FORMAT binary)',
				   bytes, copyfile);
	RETURN qft_error(format('COPY qft_back FROM %L WITH (FORMAT binary)',
							copyfile));
END
$$;
-- header: version 4, name length 4, "integer" 7, seed 4, rbits 4,
-- space_mult 8 (from byte 24), space_exp 4 (32), home_slots 4 (36), pages
-- 4 (40), area_bytes 4, capacity 8, fp_rate 8, total 8: the areas start
-- at byte 72
SELECT qft_recv(overlay(qfilter_send(f) PLACING '\x00000004' FROM 1), :'copyfile')
FROM qft_small;
-- the version 1 value, read as version 3, goes both ways
SELECT qft_recv(qfilter_send(:'small_v1'::qfilter), :'copyfile');
SELECT qft_recv(overlay(qfilter_send(f) PLACING '\xfffffffe' FROM 5), :'copyfile')
FROM qft_small;
SELECT qft_recv(overlay(qfilter_send(f) PLACING '\x00000000' FROM 20), :'copyfile')
FROM qft_small;
SELECT qft_recv(overlay(qfilter_send(f) PLACING '\x00000100' FROM 40), :'copyfile')
FROM qft_small;
SELECT qft_recv(overlay(overlay(qfilter_send(f) PLACING '\x00000002' FROM 40)
						PLACING '\x0000000c' FROM 32), :'copyfile')
FROM qft_small;
SELECT qft_recv(substr(qfilter_send(f), 1, 100), :'copyfile') FROM qft_small;
SELECT qft_recv(substr(qfilter_send(f), 1, 30), :'copyfile') FROM qft_small;
SELECT qft_recv(qfilter_send(f) || '\x00'::bytea, :'copyfile') FROM qft_small;
SELECT qft_recv(overlay(qfilter_send(f) PLACING '\x00' FROM 72), :'copyfile')
FROM qft_small;
COPY (SELECT 1 WHERE false) TO PROGRAM :'rmcmd';

--
-- Stored values are compressed (and toasted when large).  Lookups keep the
-- last filter they had to detoast, so a lookup per row does not detoast it
-- again as long as the filter stays the same.
--
SELECT (qfilter_info(f)).bytes, pg_column_size(f) < 2000 AS compressed
FROM qft_small;
-- two stored filters small enough to be compressed in line, looked up
-- alternately row by row (each call site caches the last one it detoasted)
CREATE TABLE qft_two AS
	SELECT lo, qfilter_agg(g, 1000, 1e-6) AS f
	FROM (VALUES (1), (101)) v(lo), generate_series(lo, lo + 99) g
	GROUP BY lo;
SELECT t.lo, count(*) FILTER (WHERE qfilter_contains(t.f, k)) AS found,
	   sum(qfilter_count(t.f, k)) AS counted
FROM generate_series(1, 200) k,
	 LATERAL (SELECT lo, f FROM qft_two WHERE k > 0) t
GROUP BY t.lo ORDER BY t.lo;
-- four stored filters of 4 MB, toasted; the lateral join looks up each
-- one for many keys in a row
SELECT p.part, c.*
FROM qft_parts p,
	 LATERAL (SELECT count(*) FILTER (WHERE qfilter_contains(p.f, k.nk)) AS found,
					 count(*) FILTER (WHERE k.part = p.part) AS own
			  FROM qft_keys k
			  WHERE k.k <= 100000 AND k.nk IS NOT NULL) c
ORDER BY p.part;

--
-- Grouped and window aggregation
--
SELECT g % 3 AS grp, qfilter_count(qfilter_agg(g % 7, 10, 0.1), 0) AS count_0
FROM generate_series(1, 210) g
GROUP BY g % 3 ORDER BY 1;
-- a growing frame finalizes the same state again and again
SELECT g, qfilter_count(qfilter_agg(g % 2, 10, 0.5) OVER (ORDER BY g), 1) AS running
FROM generate_series(1, 5) g;
SELECT g, qfilter_count(qfilter_agg(g % 2, 10, 0.5)
						OVER (ORDER BY g ROWS BETWEEN 1 PRECEDING AND CURRENT ROW), 1)
	   AS moving
FROM generate_series(1, 5) g;

--
-- Parallel aggregation gives the same filters as serial aggregation.
-- Without leader participation the partial states come from the workers
-- and pass through serialization.  The third aggregate is sized for 1000
-- keys, so the partial filters grow (differently) before they combine.
--
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT qfilter_agg(nk, 1000000, 0.01) FROM qft_keys;
EXPLAIN (COSTS OFF) SELECT qfilter_union_agg(f) FROM qft_parts;
SELECT qft_workers_launched('SELECT qfilter_agg(nk, 1000000, 0.01) FROM qft_keys');
SELECT md5(qfilter_agg(nk, 1000000, 0.01)::text) AS par1,
	   md5(qfilter_agg(nk, n, 1000000, 0.01)::text) AS par2,
	   md5(qfilter_agg(k % 100000, 1000, 0.001)::text) AS par3
FROM qft_keys \gset
SELECT md5(qfilter_union_agg(f)::text) AS par4 FROM qft_parts \gset
SELECT md5(string_agg(part || ':' || coalesce(f::text, 'NULL'), ',' ORDER BY part)) AS par5
FROM (SELECT part, qfilter_agg(nk, 100000, 0.01) AS f
	  FROM qft_keys WHERE k % 7 = 0 GROUP BY part) q \gset
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT qfilter_agg(nk, 1000000, 0.01) FROM qft_keys;
SELECT md5(qfilter_agg(nk, 1000000, 0.01)::text) = :'par1' AS same1,
	   md5(qfilter_agg(nk, n, 1000000, 0.01)::text) = :'par2' AS same2,
	   md5(qfilter_agg(k % 100000, 1000, 0.001)::text) = :'par3' AS same3
FROM qft_keys;
SELECT md5(qfilter_union_agg(f)::text) = :'par4' AS same4 FROM qft_parts;
SELECT md5(string_agg(part || ':' || coalesce(f::text, 'NULL'), ',' ORDER BY part)) = :'par5' AS same5
FROM (SELECT part, qfilter_agg(nk, 100000, 0.01) AS f
	  FROM qft_keys WHERE k % 7 = 0 GROUP BY part) q;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET parallel_leader_participation;

RESET jit;

--
-- Size at the capacity: areas trimmed to their home slots and the space
-- sized like a quotient_filter's, a qfilter of 100,000 keys at its
-- capacity takes at most 1.1 times the bits per key of a plain
-- bloom_filter at the same false-positive rate: the rate the qfilter
-- gives 10^6 absent keys, at which the Bloom filter's pages (and metapage)
-- per key are scaled from its own rate at its capacity, (1 - e^(-k n /
-- m))^k, by ln(1 / rate) (bits per key of a Bloom filter are proportional
-- to ln(1 / rate) at the optimal k).  The values are stored uncompressed,
-- so pg_column_size is their size (less the 4-byte header of a value
-- stored out of line).  One-area filters of a few keys are trimmed as
-- well.
--
CREATE TABLE qft_size (f int, q qfilter);
ALTER TABLE qft_size ALTER q SET STORAGE external;
INSERT INTO qft_size
SELECT f, qfilter_agg(hashint8extended(g, 0), 100000, 1.0 / f)
FROM (VALUES (64), (512), (4096)) v(f), generate_series(1, 100000) g
GROUP BY f;
SELECT bloom_create('qft_bloom_' || f, 'int8', capacity => 100000,
					fp_rate => 1.0 / f, mode => 'plain')
FROM (VALUES (64), (512), (4096)) v(f);
SELECT s.f, i.rbits, i.pages, i.load BETWEEN 0.9 AND 0.97 AS near_full,
	   m.found = 0 AS no_false_negative,
	   p.fp <= 1.0 / s.f AS within_fp,
	   pg_column_size(s.q) * 8.0 / 100000 <=
	   1.1 * (b.pages + 1) * 65536.0 / 100000 * ln(1 / p.fp) /
	   ln(1 / (1 - exp(-b.hashes * 100000.0 / b.bits)) ^ b.hashes) AS within_bloom
FROM qft_size s,
	 qfilter_info(s.q) i,
	 LATERAL (SELECT count(*) FILTER (WHERE NOT qfilter_contains(s.q, hashint8extended(g, 0))) AS found
			  FROM generate_series(1, 100000) g) m,
	 LATERAL (SELECT count(*) FILTER (WHERE qfilter_contains(s.q, hashint8extended(g, 1))) / 1e6 AS fp
			  FROM generate_series(1, 1000000) g) p,
	 bloom_info(('qft_bloom_' || s.f)::regclass) b
ORDER BY s.f;
SELECT cap, f, (qfilter_info(q)).pages, (qfilter_info(q)).bytes
FROM (VALUES (1), (100), (1000), (3973), (3974)) c(cap), (VALUES (64), (4096)) v(f),
	 LATERAL (SELECT qfilter_agg(g, cap, 1.0 / f) AS q FROM generate_series(1, cap) g) a
ORDER BY f, cap;
DROP TABLE qft_size, qft_bloom_64, qft_bloom_512, qft_bloom_4096;

DROP TABLE qft_small, qft_keys, qft_big, qft_counts, qft_removed, qft_parts,
	qft_back, qft_two;
DROP TYPE "odd ""key"" type";
DROP FUNCTION qft_error(text), qft_workers_launched(text),
	qft_remove_all(qfilter, int, int, bool), qft_recv(bytea, text);
