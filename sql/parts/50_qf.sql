
/* ---------------------------------------------------------------------
 * The quotient filter family of table access methods
 * ------------------------------------------------------------------- */

CREATE FUNCTION quotient_filter_handler(unused internal) RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'quotient_filter_handler' LANGUAGE C;
CREATE ACCESS METHOD quotient_filter TYPE TABLE HANDLER quotient_filter_handler;
COMMENT ON ACCESS METHOD quotient_filter IS 'quotient filter: approximate membership and counts with deletes, one page per operation';

CREATE FUNCTION buffered_quotient_filter_handler(unused internal) RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'buffered_quotient_filter_handler' LANGUAGE C;
CREATE ACCESS METHOD buffered_quotient_filter TYPE TABLE HANDLER buffered_quotient_filter_handler;
COMMENT ON ACCESS METHOD buffered_quotient_filter IS 'buffered quotient filter: an in-RAM QF merged into an on-disk QF by sequential passes';

CREATE FUNCTION cascade_filter_handler(unused internal) RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'cascade_filter_handler' LANGUAGE C;
CREATE ACCESS METHOD cascade_filter TYPE TABLE HANDLER cascade_filter_handler;
COMMENT ON ACCESS METHOD cascade_filter IS 'cascade filter: a COLA of quotient filters, O(log(n/M)/B) page writes per insert';

CREATE FUNCTION qf_contains(filter regclass, key anycompatible) RETURNS boolean
AS 'MODULE_PATHNAME', 'qf_contains_sql' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION qf_contains(regclass, anycompatible) IS 'true if key may have been inserted (never false for an inserted key)';

CREATE FUNCTION qf_count(filter regclass, key anycompatible) RETURNS bigint
AS 'MODULE_PATHNAME', 'qf_count_sql' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION qf_count(regclass, anycompatible) IS 'multiplicity of the key''s fingerprint (exact unless another key shares it)';

-- STRICT: a NULL key or count deletes nothing and returns NULL (a NULL key
-- must never be hashed as if it were a value).
CREATE FUNCTION qf_delete(filter regclass, key anycompatible, count bigint DEFAULT 1) RETURNS void
AS 'MODULE_PATHNAME', 'qf_delete_sql' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION qf_delete(regclass, anycompatible, bigint) IS 'remove count copies of key at commit';

CREATE FUNCTION qf_merge(target regclass, source regclass) RETURNS bigint
AS 'MODULE_PATHNAME', 'qf_merge_sql' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION qf_merge(regclass, regclass) IS 'add every fingerprint of source into target at commit; returns the number of fingerprints';

CREATE FUNCTION qf_merge_value(filter regclass, value qfilter) RETURNS bigint
AS 'MODULE_PATHNAME', 'qf_merge_value_sql' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION qf_merge_value(regclass, qfilter) IS 'add every fingerprint of an in-memory qfilter into a filter table at commit; returns the number of fingerprints';

CREATE FUNCTION qf_flush(filter regclass) RETURNS bigint
AS 'MODULE_PATHNAME', 'qf_flush_sql' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION qf_flush(regclass) IS 'consolidate every committed change into the levels now; returns the filter''s items';
CREATE FUNCTION qf_resize(filter regclass) RETURNS bigint
AS 'MODULE_PATHNAME', 'qf_resize_sql' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION qf_resize(regclass) IS 'double the filter now without rehashing; returns the new number of pages';

CREATE FUNCTION qf_info(filter regclass,
	OUT access_method text, OUT capacity bigint, OUT fp_rate float8,
	OUT fingerprint_bits int, OUT remainder_bits int, OUT slot_bits int,
	OUT levels int, OUT pages bigint, OUT items bigint, OUT total_count bigint,
	OUT load_factor float8, OUT false_positive_rate float8,
	OUT relation_pages bigint, OUT resizes bigint, OUT seed bigint,
	OUT pending_records bigint, OUT pending_bytes bigint)
AS 'MODULE_PATHNAME', 'qf_info_sql' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION qf_info(regclass) IS 'parameters and counters of a quotient filter table (its levels as consolidated; pending_records: changes still in its change log)';

-- Not STRICT on purpose: a NULL optional argument means its default (the
-- GUC's); a NULL name or key type is an error (22004).
CREATE FUNCTION qf_create(name text, key_type regtype,
	capacity bigint DEFAULT NULL, fp_rate float8 DEFAULT NULL,
	counted bool DEFAULT false, unlogged bool DEFAULT false,
	access_method text DEFAULT 'quotient_filter', fanout int DEFAULT NULL,
	buffer_size text DEFAULT NULL)
RETURNS regclass
AS 'MODULE_PATHNAME', 'qf_create_sql' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION qf_create(text, regtype, bigint, float8, bool, bool, text, int, text) IS 'create a quotient filter, buffered quotient filter or cascade filter table with explicit parameters';
