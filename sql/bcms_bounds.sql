-- bcms error bounds on a Zipf stream of 10^6 items, buffered and plain
SET client_min_messages = warning;
-- what waits in the log below is what this session left there: its
-- commits queue nothing for a background worker
SET streamsketch.background_consolidation = off;
SELECT setseed(0.5);
-- P(key >= k) = k^(-1/3): a heavy head and a long tail of distinct keys
CREATE TEMP TABLE stream AS
	SELECT floor(power(random(), -3))::int8 AS key FROM generate_series(1, 1000000);
CREATE TEMP TABLE exact AS SELECT key, count(*) AS n FROM stream GROUP BY key;
SELECT count(*) > 40000 AS many_distinct_keys FROM exact;

SELECT bcms_create('zb', 'int8', epsilon => 0.001, delta => 0.01);
SELECT bcms_create('zp', 'int8', epsilon => 0.001, delta => 0.01, mode => 'plain');
SELECT bcms_create('zc', 'int8', epsilon => 0.001, delta => 0.01, conservative => true);
-- several transactions, so sub-buffers fill and flush across commits; the
-- last one is small, so its entries wait in the log and the sub-buffers
-- (VACUUM consolidates the one before: combined per key, its log is too
-- short for the last one's statement to)
INSERT INTO zb SELECT key FROM stream LIMIT 300000;
INSERT INTO zb SELECT key FROM stream OFFSET 300000 LIMIT 699000;
VACUUM zb;
INSERT INTO zb SELECT key FROM stream OFFSET 999000;
INSERT INTO zp SELECT key FROM stream;
INSERT INTO zc SELECT key FROM stream LIMIT 500000;
INSERT INTO zc SELECT key FROM stream OFFSET 500000;
-- the plain sketch's one transaction, consolidated
VACUUM zp;

SELECT mode, width, depth, items, total_weight, buffered_entries > 0 AS buffering
FROM bcms_info('zb') UNION ALL
SELECT mode, width, depth, items, total_weight, buffered_entries > 0
FROM bcms_info('zp');

CREATE TEMP TABLE est AS
SELECT key, n, bcms_estimate('zb', key) AS b, bcms_estimate('zp', key) AS p,
	   bcms_estimate('zc', key) AS c
FROM exact;

-- never an underestimate
SELECT count(*) FILTER (WHERE b < n) AS under_buffered,
	   count(*) FILTER (WHERE p < n) AS under_plain,
	   count(*) FILTER (WHERE c < n) AS under_conservative
FROM est;
-- the share of keys whose error exceeds epsilon*n is at most delta
SELECT avg((b - n > 0.001 * 1000000)::int) <= 0.01 AS buffered_within_delta,
	   avg((p - n > 0.001 * 1000000)::int) <= 0.01 AS plain_within_delta,
	   avg((c - n > 0.001 * 1000000)::int) <= 0.01 AS conservative_within_delta
FROM est;
-- BCMS and plain CMS overestimate alike (paper, section 5.5)
SELECT avg(b - n) / avg(p - n) BETWEEN 0.5 AND 2.0 AS comparable_mean_overestimate,
	   max(b - n)::float8 / max(p - n) BETWEEN 0.25 AND 4.0 AS comparable_max_overestimate
FROM est;
-- conservative update never overestimates more, and cuts the mean overestimate
SELECT count(*) FILTER (WHERE c > b) AS conservative_worse,
	   avg(c - n) < 0.75 * avg(b - n) AS conservative_cuts_mean_by_a_quarter
FROM est;
-- flushing the sub-buffers changes no estimate
SELECT bcms_flush('zb') > 0 AS flushed;
SELECT count(*) AS changed_by_flush FROM est WHERE bcms_estimate('zb', key) <> b;
SELECT buffered_entries FROM bcms_info('zb');
