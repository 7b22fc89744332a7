-- scripts/demo.sql -- streamsketch demo: a buffered count-min sketch (bcms)
-- fed with a Zipf-distributed stream, compared with exact counts.
--
-- Run by scripts/demo.sh.  psql variables (override with -v name=value):
--   n    number of events                  (default 3000000)
--   s    Zipf exponent, > 1                (default 1.5)
--   eps  the sketch's epsilon              (default 0.001)
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
SELECT pg_size_pretty(pg_relation_size('clicks')) AS sketch,
       pg_size_pretty(pg_relation_size('events')) AS raw_events,
       pg_size_pretty(pg_relation_size('exact')) AS exact_counts;
