
/* ---------------------------------------------------------------------
 * bcms: the buffered count-min sketch table access method
 * ------------------------------------------------------------------- */

CREATE FUNCTION bcms_handler(unused internal) RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'bcms_handler' LANGUAGE C;

CREATE ACCESS METHOD bcms TYPE TABLE HANDLER bcms_handler;
COMMENT ON ACCESS METHOD bcms IS 'buffered count-min sketch: frequency estimates with epsilon*n error, one page read per estimate';

CREATE FUNCTION bcms_estimate(sketch regclass, key anycompatible) RETURNS bigint
AS 'MODULE_PATHNAME', 'bcms_estimate' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bcms_estimate(regclass, anycompatible) IS 'estimated count of key (never below the true count)';

CREATE FUNCTION bcms_flush(sketch regclass) RETURNS bigint
AS 'MODULE_PATHNAME', 'bcms_flush' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION bcms_flush(regclass) IS 'apply all buffered updates to the sketch pages; returns the number applied';

CREATE FUNCTION bcms_info(sketch regclass,
	OUT mode text, OUT epsilon float8, OUT delta float8, OUT width bigint,
	OUT depth int, OUT sketch_pages int, OUT buffer_pages int,
	OUT subbuffer_capacity int, OUT conservative bool, OUT seed bigint,
	OUT items bigint, OUT total_weight bigint, OUT buffered_entries bigint,
	OUT relation_pages bigint, OUT error_bound float8,
	OUT pending_records bigint, OUT pending_bytes bigint)
AS 'MODULE_PATHNAME', 'bcms_info' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bcms_info(regclass) IS 'parameters and counters of a bcms table (width: the counters per row actually used, rounded up to whole pages in buffered mode)';

CREATE FUNCTION bcms_merge(sketch regclass, value cms) RETURNS void
AS 'MODULE_PATHNAME', 'bcms_merge' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION bcms_merge(regclass, cms) IS 'add an in-memory cms with the same parameters into a bcms table (at commit)';

-- Not STRICT on purpose: a NULL optional argument means its default (the
-- GUC's); a NULL name or key type is an error (22004).
CREATE FUNCTION bcms_create(name text, key_type regtype,
	epsilon float8 DEFAULT NULL, delta float8 DEFAULT NULL,
	width bigint DEFAULT NULL, depth int DEFAULT NULL,
	weighted bool DEFAULT false, mode text DEFAULT NULL,
	conservative bool DEFAULT NULL, buffer_size text DEFAULT NULL,
	unlogged bool DEFAULT false)
RETURNS regclass
AS 'MODULE_PATHNAME', 'bcms_create' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION bcms_create(text, regtype, float8, float8, bigint, int, bool, text, bool, text, bool) IS 'create a bcms table with explicit parameters';
