/* streamsketch -- external-memory streaming structures for PostgreSQL */

\echo Use "CREATE EXTENSION streamsketch" to load this file. \quit


CREATE FUNCTION streamsketch_log_info(structure regclass,
	OUT log_bytes bigint, OUT log_records bigint, OUT log_pages bigint,
	OUT free_log_pages bigint, OUT consolidations bigint,
	OUT relation_pages bigint)
AS 'MODULE_PATHNAME', 'streamsketch_log_info' LANGUAGE C STRICT STABLE PARALLEL SAFE;
COMMENT ON FUNCTION streamsketch_log_info(regclass) IS 'the change log of a streamsketch structure: unconsolidated bytes and records, its pages and free pages, rounds so far';
