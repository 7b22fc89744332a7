-- scripts/demo.sql -- streamsketch demo: a buffered count-min sketch (bcms)
-- fed with a Zipf-distributed stream, compared with exact counts.
--
-- Then the same stream into a heavy-hitter table (lert): each key whose
-- count reaches the threshold is reported once, compared with the exact
-- answer; as page views into a GROUP BY maintained as rows arrive
-- (cbt), compared with GROUP BY over the raw rows; and into a sample
-- (bfile), its statistics next to the exact ones.
--
-- Run by scripts/demo.sh.  psql variables (override with -v name=value):
--   n    number of events                  (default 3000000)
--   s    Zipf exponent, > 1                (default 1.5)
--   eps  the sketch's epsilon              (default 0.001)
--   T    the heavy-hitter threshold        (default 1000)
\set ON_ERROR_STOP on
\if :{?n}
\else
\set n 3000000
\endif
\if :{?s}
\else
\set s 1.5
\endif
\if :{?eps}
\else
\set eps 0.001
\endif
\if :{?T}
\else
\set T 1000
\endif
\set QUIET on
\pset null '-'
SET client_min_messages = warning;

\echo
\echo '== 1. A bcms table: its parameters come from the streamsketch.* settings'
CREATE EXTENSION IF NOT EXISTS streamsketch;
DROP TABLE IF EXISTS clicks;
SET streamsketch.bcms_epsilon = :eps;
SET streamsketch.bcms_delta = 0.01;
CREATE TABLE clicks (key bigint) USING bcms;
SELECT mode, epsilon, delta, width, depth, sketch_pages, buffer_pages,
       conservative
  FROM bcms_info('clicks');

\echo
\echo '== 2. The stream: ' :n ' events, P(key = k) ~ k^-' :s ' (inverse-transform sampling)'
SELECT setseed(0.42) \g /dev/null
CREATE TEMP TABLE events AS
SELECT floor(power(greatest(1.0 - random(), 1e-9), -1.0 / (:s - 1)))::bigint AS key
  FROM generate_series(1, :n);

\echo
\echo '== 3. Stream it into the sketch (one INSERT; COPY works the same)'
\timing on
INSERT INTO clicks SELECT key FROM events;
\timing off
\echo '   (heap insert of the same events into a plain table, for comparison:)'
CREATE TEMP TABLE clicks_heap (key bigint);
\timing on
INSERT INTO clicks_heap SELECT key FROM events;
\timing off

\echo
\echo '== 4. Exact counts, for comparison, in an ordinary (temp heap) table'
CREATE TEMP TABLE exact AS SELECT key, count(*) AS n FROM events GROUP BY key;
CREATE TEMP TABLE est AS
SELECT key, n, bcms_estimate('clicks', key) AS estimate FROM exact;

\echo
\echo '== 5. The 20 most frequent keys: estimate next to the exact count'
SELECT key, n AS exact, estimate, estimate - n AS overestimate,
       round(100.0 * (estimate - n) / n, 4) AS "error %"
  FROM est
 ORDER BY n DESC, key
 LIMIT 20;

\echo
\echo '== 6. The guarantee: estimate >= exact, and estimate - exact <= error_bound'
\echo '      (e/width * n <= epsilon * n) for each key with probability >= 1 - delta'
SELECT i.items, i.total_weight AS n, i.epsilon, round(i.error_bound::numeric, 1) AS error_bound,
       s.distinct_keys, s.exact_estimates, s.underestimates,
       s.max_overestimate, s.beyond_bound
  FROM bcms_info('clicks') i,
       LATERAL (SELECT count(*) AS distinct_keys,
                       count(*) FILTER (WHERE estimate = n) AS exact_estimates,
                       count(*) FILTER (WHERE estimate < n) AS underestimates,
                       max(estimate - n) AS max_overestimate,
                       count(*) FILTER (WHERE estimate - n > i.error_bound)
                         AS beyond_bound
                  FROM est) s;
SELECT bcms_estimate('clicks', 0::bigint) AS "estimate of a key never seen";

\echo
\echo '== 7. Transactions: own pending inserts are visible, ROLLBACK leaves no trace'
BEGIN;
INSERT INTO clicks SELECT 1 FROM generate_series(1, 1000);
SELECT bcms_estimate('clicks', 1::bigint) AS "key 1 inside the transaction";
ROLLBACK;
SELECT bcms_estimate('clicks', 1::bigint) AS "key 1 after ROLLBACK";

\echo
\echo '== 8. Flush the buffered updates into the sketch pages'
SELECT buffered_entries AS "buffered before flush" FROM bcms_info('clicks');
SELECT bcms_flush('clicks') AS entries_applied;
SELECT buffered_entries AS "buffered after flush" FROM bcms_info('clicks');
SELECT count(*) FILTER (WHERE bcms_estimate('clicks', key) <> estimate)
         AS "estimates changed by the flush",
       count(*) FILTER (WHERE bcms_estimate('clicks', key) < n)
         AS "underestimates after the flush"
  FROM est;

\echo
\echo '== 9. Size: the sketch against the raw events and the exact counts'
\echo '       (after the background worker gave back the pages of the change log)'
DO $$
BEGIN
	FOR i IN 1 .. 300 LOOP
		EXIT WHEN (SELECT log_pages + free_log_pages = 0
					 FROM streamsketch_pending
					WHERE relation = 'clicks'::regclass);
		PERFORM pg_sleep(0.1);
	END LOOP;
END
$$;
SELECT pg_size_pretty(pg_relation_size('clicks')) AS sketch,
       pg_size_pretty(pg_relation_size('events')) AS raw_events,
       pg_size_pretty(pg_relation_size('exact')) AS exact_counts;

\echo
\echo '== 10. Heavy hitters: a lert table reports every key once, soon after its'
\echo '       T-th event (T = ' :T '), exactly: no false positive, no false negative'
DROP TABLE IF EXISTS hot;
-- a small level 0 (64kB: 1,024 keys), so that most keys spill to the
-- on-disk levels and are counted there
SELECT lert_create('hot', 'int8', threshold => :T, buffer_size => '64kB') \g /dev/null
-- the same events, in the same order (a sequential scan of the temp table)
CREATE TEMP TABLE stream AS
SELECT row_number() OVER () - 1 AS pos, key FROM events;
\timing on
INSERT INTO hot SELECT key FROM stream ORDER BY pos;
\timing off
CREATE INDEX ON stream (key, pos);
\echo '   The first reports (SELECT * FROM hot gives the keys; lert_reports the details):'
SELECT report_id, key, count AS "count at report", first_position,
       reported_position,
       (SELECT pos FROM stream s WHERE s.key = r.key::bigint
         ORDER BY pos OFFSET :T - 1 LIMIT 1) AS "position of the T-th event"
  FROM lert_reports('hot') r
 ORDER BY report_id
 LIMIT 10;
\echo '   Against the exact counts: every key at or over the count-stretch bound is'
\echo '   reported, none under T; keys between T and the bound may wait for a flush'
SELECT count(*) FILTER (WHERE e.n >= :T) AS "keys with >= T events",
       count(r.key) AS reported,
       count(r.key) FILTER (WHERE e.n < :T) AS false_positives,
       count(*) FILTER (WHERE r.key IS NULL AND e.n >= i.count_stretch_bound)
         AS missed,
       max(r.count) AS "largest count at report"
  FROM exact e
  LEFT JOIN lert_reports('hot') r ON r.key::bigint = e.key,
       lert_info('hot') i;
SELECT variant, threshold, count_stretch_bound, levels, reports, flushes
  FROM lert_info('hot');
SELECT lert_flush('hot') AS "reports made by lert_flush";
SELECT count(*) FILTER (WHERE e.n >= :T) AS "keys with >= T events",
       count(r.key) AS "reported after the flush",
       count(r.key) FILTER (WHERE e.n < :T) AS false_positives,
       count(*) FILTER (WHERE r.key IS NULL AND e.n >= :T) AS missed
  FROM exact e
  LEFT JOIN lert_reports('hot') r ON r.key::bigint = e.key;
SELECT lert_count('hot', 1::bigint) AS "lert_count of key 1",
       (SELECT n FROM exact WHERE key = 1) AS "exact count of key 1";

\echo
\echo '== 11. A GROUP BY maintained as rows arrive: a cbt table of page views'
\echo '       per URL (count, bytes, mean latency, last visit), against GROUP BY'
DROP TABLE IF EXISTS page_stats;
SELECT cbt_create('page_stats', group_by => 'url text',
                  aggregates => 'count(*) AS views, sum(bytes::int) AS total_bytes,
                                 avg(latency::float8) AS mean_latency,
                                 max(ts::timestamptz) AS last_visit') \g /dev/null
-- the page views: one per event, the URL from its key
CREATE TEMP TABLE views AS
SELECT '/page/' || key AS url, (100 + key % 900)::int AS bytes,
       (key % 50) / 10.0 + random() AS latency,
       timestamptz '2026-01-01' + pos * interval '1 second' AS ts
  FROM stream;
\timing on
INSERT INTO page_stats (url, bytes, latency, ts) SELECT url, bytes, latency, ts FROM views;
\timing off
\echo '   The busiest pages, from the cbt (SELECT * reads the tree, finalizing groups):'
\timing on
SELECT url, views, total_bytes, round(mean_latency::numeric, 3) AS mean_latency, last_visit
  FROM page_stats ORDER BY views DESC, url LIMIT 5;
\timing off
SELECT height, nodes, fragments, rows, pg_size_pretty(stored_bytes) AS compressed,
       pg_size_pretty(relation_pages * 8192) AS relation,
       pending_records AS "rows still in the log"
  FROM cbt_info('page_stats');
\echo '   The same GROUP BY over the raw rows (a heap), for comparison:'
\timing on
SELECT url, count(*) AS views, sum(bytes) AS total_bytes,
       round(avg(latency)::numeric, 3) AS mean_latency, max(ts) AS last_visit
  FROM views GROUP BY url ORDER BY views DESC, url LIMIT 5;
\timing off
\echo '   Every group against GROUP BY (floats within rounding):'
SELECT count(*) AS groups,
       count(*) FILTER (WHERE c.url IS NULL OR g.url IS NULL OR c.views <> g.views
                        OR c.total_bytes <> g.total_bytes OR c.last_visit <> g.last_visit
                        OR abs(c.mean_latency - g.mean_latency) > 1e-9) AS different
  FROM page_stats c
  FULL JOIN (SELECT url, count(*) AS views, sum(bytes) AS total_bytes, avg(latency) AS mean_latency,
                    max(ts) AS last_visit FROM views GROUP BY url) g USING (url);
\echo '   One group from its root-to-leaf path:'
SELECT url, views, total_bytes FROM cbt_lookup(NULL::page_stats, '/page/1');

\echo
\echo '== 12. A sample far smaller than the stream: a bfile table keeps at most'
\echo '       1,000 of the page views, uniformly; its mean and quantiles next to'
\echo '       the exact ones over every view'
DROP TABLE IF EXISTS views_sample;
SELECT bfile_create('views_sample', 'url text, bytes int, latency float8',
                    sample_size => 1000, min_fraction => 0.8) \g /dev/null
INSERT INTO views_sample SELECT url, bytes, latency FROM views;
SELECT size, seen, level, round(inclusion_probability::numeric, 6) AS inclusion_probability
  FROM bfile_info('views_sample');
SELECT 'sample' AS over, count(*) AS rows, round(avg(latency)::numeric, 3) AS mean_latency,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY latency)::numeric, 3) AS median,
       round(percentile_cont(0.9) WITHIN GROUP (ORDER BY latency)::numeric, 3) AS p90,
       round(avg(bytes)::numeric, 1) AS mean_bytes
  FROM views_sample
UNION ALL
SELECT 'every view', count(*), round(avg(latency)::numeric, 3),
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY latency)::numeric, 3),
       round(percentile_cont(0.9) WITHIN GROUP (ORDER BY latency)::numeric, 3),
       round(avg(bytes)::numeric, 1)
  FROM views;
\echo '   Exactly 100 of the sampled views (bfile_subsample), and sample_agg in memory:'
SELECT count(*) AS subsample FROM bfile_subsample(NULL::views_sample, 100);
SELECT cardinality(sample_agg(url, 5)) AS urls_drawn_in_memory FROM views;
