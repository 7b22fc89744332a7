
/* ---------------------------------------------------------------------
 * bloom_filter: the paged Bloom filter and its SSD variants (plain, the
 * elevator Bloom filter, the buffered Bloom filter with hash localization)
 * ------------------------------------------------------------------- */

CREATE FUNCTION bloom_filter_handler(unused internal) RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'bloom_filter_handler' LANGUAGE C;
CREATE ACCESS METHOD bloom_filter TYPE TABLE HANDLER bloom_filter_handler;
COMMENT ON ACCESS METHOD bloom_filter IS 'paged Bloom filter: plain, elevator-buffered (EBF) or buffered with hash localization (BBF)';

-- PARALLEL RESTRICTED: the transaction's own pending inserts live in the
-- leader's memory, so a parallel worker would not see them.
CREATE FUNCTION bloom_contains(filter regclass, key anycompatible) RETURNS boolean
AS 'MODULE_PATHNAME', 'bloom_contains' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bloom_contains(regclass, anycompatible) IS 'true if key may have been inserted (never false for an inserted key)';

CREATE FUNCTION bloom_flush(filter regclass) RETURNS bigint
AS 'MODULE_PATHNAME', 'bloom_flush' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION bloom_flush(regclass) IS 'apply all buffered inserts to the bit pages; returns the number applied';

CREATE FUNCTION bloom_info(filter regclass,
	OUT mode text, OUT capacity bigint, OUT fp_rate float8, OUT bits bigint,
	OUT hashes int, OUT pages int, OUT buffer_pages int,
	OUT subbuffer_capacity int, OUT buffered_entries bigint, OUT items bigint,
	OUT bits_set bigint, OUT fill_ratio float8, OUT false_positive_rate float8,
	OUT flushes bigint, OUT relation_pages bigint, OUT seed bigint,
	OUT pending_records bigint, OUT pending_bytes bigint)
AS 'MODULE_PATHNAME', 'bloom_info' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bloom_info(regclass) IS 'parameters and counters of a bloom_filter table';

-- Not STRICT on purpose: a NULL optional argument means its default (the
-- GUC's); a NULL name or key type is an error (22004).
CREATE FUNCTION bloom_create(name text, key_type regtype,
	capacity bigint DEFAULT NULL, fp_rate float8 DEFAULT NULL,
	mode text DEFAULT NULL, buffer_size text DEFAULT NULL,
	unlogged bool DEFAULT false)
RETURNS regclass
AS 'MODULE_PATHNAME', 'bloom_create' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION bloom_create(text, regtype, bigint, float8, text, text, bool) IS 'create a bloom_filter table with explicit parameters';
