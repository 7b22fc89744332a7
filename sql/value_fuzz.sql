--
-- value_fuzz: mutations of valid cms and qfilter values, in text and in
-- binary form, with a fixed seed.  Every mutation must end in a clean
-- error or in a value that passes the full check; every accepted value
-- must round-trip text -> value -> binary -> value -> text and binary ->
-- value -> text -> value unchanged, with the size its header implies; the
-- backend must survive (the last query) and its peak memory stay bounded.
-- The table of outcomes is deterministic (setseed, PostgreSQL's own PRNG).
--

-- Binary input from SQL goes through COPY (FORMAT binary) of a one-row
-- file written with lo_export (relative paths are in the data directory).
CREATE TABLE vf_cms (v cms);
CREATE TABLE vf_qf (v qfilter);
CREATE FUNCTION vf_copy_file(b bytea) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	lo oid;
	path text := 'value_fuzz_' || pg_backend_pid() || '.bin';
BEGIN
	lo := lo_from_bytea(0, '\x5047434f50590aff0d0a00'::bytea	-- signature
						|| '\x0000000000000000'::bytea		-- flags, extension
						|| '\x0001'::bytea || int4send(length(b)) || b
						|| '\xffff'::bytea);
	PERFORM lo_export(lo, path);
	PERFORM lo_unlink(lo);
	RETURN path;
END
$$;
CREATE FUNCTION vf_recv_cms(b bytea) RETURNS cms
LANGUAGE plpgsql AS $$
DECLARE
	r cms;
BEGIN
	DELETE FROM vf_cms;
	EXECUTE format('COPY vf_cms FROM %L (FORMAT binary)', vf_copy_file(b));
	SELECT v INTO r FROM vf_cms;
	RETURN r;
END
$$;
CREATE FUNCTION vf_recv_qfilter(b bytea) RETURNS qfilter
LANGUAGE plpgsql AS $$
DECLARE
	r qfilter;
BEGIN
	DELETE FROM vf_qf;
	EXECUTE format('COPY vf_qf FROM %L (FORMAT binary)', vf_copy_file(b));
	SELECT v INTO r FROM vf_qf;
	RETURN r;
END
$$;

-- The key type name's length in a binary form (0 if none).
CREATE FUNCTION vf_name_len(b bytea) RETURNS int
LANGUAGE sql AS $$
	SELECT greatest(0, (get_byte(b, 4) << 24) | (get_byte(b, 5) << 16)
					   | (get_byte(b, 6) << 8) | get_byte(b, 7))
$$;

CREATE FUNCTION vf_rand(n int) RETURNS int	-- 0 .. n-1
LANGUAGE sql AS $$ SELECT floor(random() * n)::int $$;

-- A position, mostly in the first `head` units (where the header is).
CREATE FUNCTION vf_pos(len int, head int) RETURNS int
LANGUAGE sql AS $$
	SELECT CASE WHEN random() < 0.7 THEN vf_rand(least(len, head))
				ELSE vf_rand(len) END
$$;

-- One mutation of a binary form.
CREATE FUNCTION vf_mutate_bytes(b bytea) RETURNS bytea
LANGUAGE plpgsql AS $$
DECLARE
	len int := length(b);
	ints int[] := ARRAY[0, 1, 2, 3, 7, 16, 17, 28, 29, 32, 33, 60, 61, 64,
						65, 255, 256, 1019, 1020, 8136, 65535, 80000,
						2147483647, -1, -2, -2147483648];
	floats bytea[] := ARRAY[float8send(0), float8send('-0'), float8send(1),
							float8send(0.5), float8send(1e-300),
							float8send('NaN'), float8send('Infinity'),
							float8send(2.2250738585072014e-308),
							'\x0000000000000001'::bytea,
							'\x000fffffffffffff'::bytea,
							int8send(9223372036854775807),
							int8send(-1), int8send(0)];
	p int;
	n int;
BEGIN
	CASE vf_rand(7)
		WHEN 0, 1 THEN			-- one byte replaced
			p := vf_pos(len, 64);
			RETURN set_byte(b, p, vf_rand(256));
		WHEN 2 THEN				-- a bit flipped
			p := vf_pos(len, 64);
			RETURN set_bit(b, p * 8 + vf_rand(8),
						   1 - get_bit(b, p * 8 + vf_rand(1)));
		WHEN 3 THEN				-- an aligned 4-byte field replaced
			p := 4 * vf_rand(least(len, 64) / 4);
			RETURN overlay(b PLACING int4send(ints[1 + vf_rand(array_length(ints, 1))])
						   FROM p + 1 FOR 4);
		WHEN 4 THEN				-- an 8-byte field replaced
			p := 4 * vf_rand(least(len - 8, 64) / 4);
			RETURN overlay(b PLACING floats[1 + vf_rand(array_length(floats, 1))]
						   FROM p + 1 FOR 8);
		WHEN 5 THEN				-- truncated
			RETURN substring(b FROM 1 FOR vf_pos(len, 80));
		ELSE					-- bytes inserted or removed
			p := vf_pos(len, 64);
			n := 1 + vf_rand(16);
			IF random() < 0.5 THEN
				RETURN overlay(b PLACING substring(b FROM vf_rand(len) + 1 FOR n)
							   FROM p + 1 FOR 0);
			END IF;
			RETURN overlay(b PLACING '' FROM p + 1 FOR n);
	END CASE;
END
$$;

-- One mutation of a text form.
CREATE FUNCTION vf_mutate_text(t text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	len int := length(t);
	fields text[] := ARRAY['version', 'seed', 'epsilon', 'delta', 'depth',
						   'cols_per_page', 'pages', 'total', 'capacity',
						   'fp_rate', 'rbits', 'space', 'home_slots',
						   'area_bytes', 'type'];
	vals text[] := ARRAY['0', '1', '2', '7', '16', '17', '28', '33', '60',
						 '61', '64', '65', '255', '256', '1019', '1020',
						 '8136', '65536', '80000', '4294967295',
						 '4294967296', '9223372036854775807',
						 '9223372036854775808', '18446744073709551615',
						 '18446744073709551616', '-1', '5e-324',
						 '2.2250738585072014e-308', '1e-400', '1e400',
						 'nan', 'inf', '0.5', '0x1p-3', '', 'x',
						 '"integer"', '"pg_catalog.text"', '"nosuchtype"',
						 '"23"', '"999999"', '"record"'];
	chars text := ' =",.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/-_';
	p int;
	n int;
BEGIN
	CASE vf_rand(6)
		WHEN 0, 1 THEN			-- a header field's value replaced
			RETURN regexp_replace(t, '(\m' || fields[1 + vf_rand(array_length(fields, 1))]
								  || '=)("[^"]*"|[^ ]*)',
								  '\1' || replace(vals[1 + vf_rand(array_length(vals, 1))], '\', '\\'));
		WHEN 2 THEN				-- one character replaced
			p := vf_pos(len, 200);
			RETURN overlay(t PLACING substr(chars, 1 + vf_rand(length(chars)), 1)
						   FROM p + 1 FOR 1);
		WHEN 3 THEN				-- truncated
			RETURN substring(t FROM 1 FOR vf_pos(len, 250));
		WHEN 4 THEN				-- a span duplicated
			p := vf_pos(len, 200);
			n := 1 + vf_rand(12);
			RETURN overlay(t PLACING substring(t FROM vf_rand(len) + 1 FOR n)
						   FROM p + 1 FOR 0);
		ELSE					-- a span removed
			p := vf_pos(len, 200);
			RETURN overlay(t PLACING '' FROM p + 1 FOR 1 + vf_rand(12));
	END CASE;
END
$$;

-- The valid values mutated: keyed and key-less, depth 1 and 7, weighted
-- counts, sparse and full filters, large counts.
CREATE TABLE vf_base (kind text, v text);
INSERT INTO vf_base
SELECT 'cms', cms_agg(i, 0.5, 0.5)::text FROM generate_series(1, 20) i
UNION ALL
SELECT 'cms', cms_agg(i::text, i, 0.1, 0.001)::text FROM generate_series(1, 50) i
UNION ALL
SELECT 'cms', regexp_replace(cms_agg(i % 7, 0.3, 0.2)::text, ' type="[^"]*"', '')
FROM generate_series(1, 1000) i
UNION ALL
SELECT 'qfilter', qfilter_agg(i, 100, 0.01)::text FROM generate_series(1, 30) i
UNION ALL
SELECT 'qfilter', qfilter_agg(i::text, i * 1000000007::bigint, 1000, 0.001)::text
FROM generate_series(1, 40) i
UNION ALL
SELECT 'qfilter', regexp_replace(qfilter_agg(i, 50, 0.2)::text, ' type="[^"]*"', '')
FROM generate_series(1, 200) i;

SELECT kind, count(*) AS base_values FROM vf_base GROUP BY 1 ORDER BY 1;

CREATE TABLE vf_outcome (kind text, form text, outcome text, round_trip text);

SELECT vf_peak_rss_kb_before FROM (
	SELECT substring(pg_read_file('/proc/' || pg_backend_pid() || '/status')
					 FROM 'VmHWM:\s*(\d+)')::bigint AS vf_peak_rss_kb_before) s \gset

-- 2000 mutations per type and form.
DO $$
DECLARE
	bases record;
	cms_texts text[];
	qf_texts text[];
	kind text;
	form text;
	t text;
	b bytea;
	c cms;
	q qfilter;
	ok bool;
	outcome text;
	rt text;
BEGIN
	PERFORM setseed(0.2024);
	SELECT array_agg(v ORDER BY v) INTO cms_texts FROM vf_base WHERE vf_base.kind = 'cms';
	SELECT array_agg(v ORDER BY v) INTO qf_texts FROM vf_base WHERE vf_base.kind = 'qfilter';
	FOR i IN 0 .. 4 * 2000 - 1 LOOP
		kind := CASE WHEN i % 4 < 2 THEN 'cms' ELSE 'qfilter' END;
		form := CASE WHEN i % 2 = 0 THEN 'text' ELSE 'binary' END;
		ok := false;
		rt := NULL;
		BEGIN
			IF kind = 'cms' THEN
				t := cms_texts[1 + (i / 4) % array_length(cms_texts, 1)];
				IF form = 'text' THEN
					c := vf_mutate_text(t)::cms;
				ELSE
					c := vf_recv_cms(vf_mutate_bytes(cms_send(t::cms)));
				END IF;
			ELSE
				t := qf_texts[1 + (i / 4) % array_length(qf_texts, 1)];
				IF form = 'text' THEN
					q := vf_mutate_text(t)::qfilter;
				ELSE
					q := vf_recv_qfilter(vf_mutate_bytes(qfilter_send(t::qfilter)));
				END IF;
			END IF;
			ok := true;
			outcome := 'accepted';
		EXCEPTION WHEN OTHERS THEN
			outcome := SQLSTATE;
		END;

		IF ok THEN
			-- both round trips, and the size the header implies
			BEGIN
				IF kind = 'cms' THEN
					b := cms_send(c);
					t := cms_out(c)::text;
					IF cms_out(vf_recv_cms(b))::text <> t THEN
						rt := 'text -> binary -> text differs';
					ELSIF cms_send(t::cms) <> b THEN
						rt := 'binary -> text -> binary differs';
					ELSIF (SELECT bytes <> 56 + 8::bigint * depth * width
							   OR length(b) - vf_name_len(b) <> bytes - 8
						   FROM cms_info(c)) THEN
						rt := 'size differs from the geometry';
					ELSE
						rt := 'ok';
					END IF;
				ELSE
					b := qfilter_send(q);
					t := qfilter_out(q)::text;
					IF qfilter_out(vf_recv_qfilter(b))::text <> t THEN
						rt := 'text -> binary -> text differs';
					ELSIF qfilter_send(t::qfilter) <> b THEN
						rt := 'binary -> text -> binary differs';
					ELSIF (SELECT bytes <> 64 + substring(t from ' area_bytes=(\d+) ')::bigint * pages
							   OR length(b) - vf_name_len(b) <> bytes
						   FROM qfilter_info(q)) THEN
						rt := 'size differs from the geometry';
					ELSE
						rt := 'ok';
					END IF;
				END IF;
			EXCEPTION WHEN OTHERS THEN
				rt := 'error ' || SQLSTATE || ': ' || SQLERRM;
			END;
		END IF;
		INSERT INTO vf_outcome VALUES (kind, form, outcome, rt);
	END LOOP;
END
$$;

-- Outcomes: accepted, or the SQLSTATE of the clean error.
SELECT kind, form, outcome, count(*) AS mutations
FROM vf_outcome GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT kind, form, count(*) AS mutations,
	   count(*) FILTER (WHERE outcome = 'accepted') AS accepted,
	   count(*) FILTER (WHERE outcome <> 'accepted') AS errors
FROM vf_outcome GROUP BY 1, 2 ORDER BY 1, 2;

-- Every accepted value round-trips (no rows).
SELECT kind, form, round_trip, count(*)
FROM vf_outcome WHERE outcome = 'accepted' AND round_trip <> 'ok'
GROUP BY 1, 2, 3;

-- No error class outside the expected ones: data corrupted, invalid text
-- or binary representation, protocol (truncated binary), and for the key
-- type name: undefined type or schema, syntax, bad encoding, a three-part
-- (cross-database) name (no rows).
SELECT DISTINCT outcome FROM vf_outcome
WHERE outcome NOT IN ('accepted', 'XX001', '22P02', '22P03', '08P01',
					  '42704', '3F000', '42601', '22021', '0A000');

-- The backend survived, and its peak memory did not grow by more than a
-- few of the largest values a mutation could legitimately produce.
SELECT substring(pg_read_file('/proc/' || pg_backend_pid() || '/status')
				 FROM 'VmHWM:\s*(\d+)')::bigint - :vf_peak_rss_kb_before < 200000
	AS memory_bounded;
