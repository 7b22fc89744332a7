
/* ---------------------------------------------------------------------
 * lert: leveled external-memory reporting tables (timely heavy hitters:
 * count stretch, time stretch, immediate report, and the cascade baseline)
 * ------------------------------------------------------------------- */

CREATE FUNCTION lert_handler(unused internal) RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'lert_handler' LANGUAGE C;
CREATE ACCESS METHOD lert TYPE TABLE HANDLER lert_handler;
COMMENT ON ACCESS METHOD lert IS 'leveled external-memory reporting table: reports every key once soon after its committed observations reach a threshold';

-- PARALLEL RESTRICTED: the transaction's own pending inserts live in the
-- leader's memory, so a parallel worker would not see them.
CREATE FUNCTION lert_count(lert regclass, key anycompatible) RETURNS bigint
AS 'MODULE_PATHNAME', 'lert_count' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION lert_count(regclass, anycompatible) IS 'exact number of observations of key so far (committed, and this transaction''s own)';

CREATE FUNCTION lert_reported(lert regclass, key anycompatible) RETURNS boolean
AS 'MODULE_PATHNAME', 'lert_reported' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION lert_reported(regclass, anycompatible) IS 'true if key has been reported';

-- Not STRICT on purpose: key_type is a NULL of the lert's key type, which
-- gives the key column its type (anyelement); PARALLEL RESTRICTED as
-- lert_count.  A view over a call with a constant lert lets the planner
-- look keys up (Custom Scan (lert counts)).
-- Its support function estimates the rows, and loads the library while
-- the planner sizes the call, before it looks for the lookup path.
CREATE FUNCTION lert_counts_support(internal) RETURNS internal
AS 'MODULE_PATHNAME', 'lert_counts_support' LANGUAGE C STRICT;
CREATE FUNCTION lert_counts(lert regclass, key_type anyelement)
RETURNS TABLE (key anyelement, count bigint)
AS 'MODULE_PATHNAME', 'lert_counts' LANGUAGE C STABLE PARALLEL RESTRICTED
SUPPORT lert_counts_support;
COMMENT ON FUNCTION lert_counts(regclass, anyelement) IS 'every key observed (committed, and this transaction''s own) with its exact count, as lert_count gives it: lert_counts(''table'', NULL::key_type)';

CREATE FUNCTION lert_reports(lert regclass, after bigint DEFAULT 0,
	OUT report_id bigint, OUT key text, OUT count bigint,
	OUT first_position bigint, OUT reported_position bigint,
	OUT reported_at timestamptz, OUT cone int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'lert_reports' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION lert_reports(regclass, bigint) IS 'the reports with an id above after, in report order (each cone''s in stream order)';

CREATE FUNCTION lert_flush(lert regclass) RETURNS bigint
AS 'MODULE_PATHNAME', 'lert_flush' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION lert_flush(regclass) IS 'merge every level, reporting every key whose count has reached the threshold; returns the reports made';

CREATE FUNCTION lert_info(lert regclass,
	OUT variant text, OUT threshold bigint, OUT age_bits int, OUT growth int,
	OUT levels int, OUT level_thresholds bigint[], OUT cones int,
	OUT level0_capacity bigint, OUT count_stretch_bound bigint,
	OUT time_stretch_bound float8, OUT observations bigint,
	OUT log_observations bigint, OUT reports bigint, OUT flushes bigint,
	OUT level0_entries bigint, OUT max_level0_entries bigint,
	OUT level_entries bigint[], OUT level_kept bigint[],
	OUT relation_pages bigint,
	OUT free_pages bigint, OUT notify text,
	OUT seed bigint, OUT level0_pages bigint, OUT level_pages bigint[],
	OUT pending_records bigint, OUT pending_bytes bigint)
AS 'MODULE_PATHNAME', 'lert_info' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION lert_info(regclass) IS 'parameters, bounds and counters of a lert table';

-- Not STRICT on purpose: a NULL optional argument means its default (the
-- setting's); a NULL name or key type is an error (22004).
CREATE FUNCTION lert_create(name text, key_type regtype,
	threshold bigint DEFAULT NULL, variant text DEFAULT NULL,
	age_bits int DEFAULT NULL, growth int DEFAULT NULL,
	buffer_size text DEFAULT NULL, cones int DEFAULT NULL,
	notify text DEFAULT NULL, unlogged bool DEFAULT false)
RETURNS regclass
AS 'MODULE_PATHNAME', 'lert_create' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION lert_create(text, regtype, bigint, text, int, int, text, int, text, bool) IS 'create a lert table with explicit parameters';
