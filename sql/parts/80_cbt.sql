
/* ---------------------------------------------------------------------
 * cbt: the compressed buffer tree, a lazily maintained GROUP BY with any
 * combinable aggregate
 * ------------------------------------------------------------------- */

CREATE FUNCTION cbt_handler(unused internal) RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'cbt_handler' LANGUAGE C;
CREATE ACCESS METHOD cbt TYPE TABLE HANDLER cbt_handler;
COMMENT ON ACCESS METHOD cbt IS 'compressed buffer tree: a GROUP BY with combinable aggregates, maintained lazily as rows are inserted and finalized on read';

-- Not STRICT on purpose: a NULL optional argument means its default (the
-- setting's); a NULL name, group_by or aggregates is an error (22004).
CREATE FUNCTION cbt_create(name text, group_by text, aggregates text,
	root_buffer text DEFAULT NULL, node_buffer text DEFAULT NULL,
	fanout int DEFAULT NULL, compression bool DEFAULT NULL,
	unlogged bool DEFAULT false)
RETURNS regclass
AS 'MODULE_PATHNAME', 'cbt_create' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION cbt_create(text, text, text, text, text, int, bool, bool) IS 'create a cbt table: group keys, and aggregates over inputs declared as name::type';

CREATE FUNCTION cbt_info(cbt regclass,
	OUT definition text, OUT root_buffer bigint, OUT node_buffer bigint,
	OUT fanout int, OUT compression bool, OUT height int, OUT nodes bigint,
	OUT fragments bigint, OUT rows bigint, OUT raw_bytes bigint,
	OUT stored_bytes bigint, OUT rounds bigint, OUT spills bigint,
	OUT splits bigint, OUT relation_pages bigint, OUT leaked_pages bigint,
	OUT free_pages bigint, OUT free_extents int,
	OUT fragments_in_pieces bigint,
	OUT pending_records bigint, OUT pending_bytes bigint)
AS 'MODULE_PATHNAME', 'cbt_info' LANGUAGE C STRICT STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION cbt_info(regclass) IS 'definition, parameters, tree shape and counters of a cbt table (the tree as consolidated; pending_records: rows still in its change log)';

CREATE FUNCTION cbt_finalize(cbt regclass) RETURNS bigint
AS 'MODULE_PATHNAME', 'cbt_finalize' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION cbt_finalize(regclass) IS 'push every buffer of a cbt down to its leaves, one fragment per leaf; returns the groups';

-- Not STRICT on purpose: the first argument is NULL (it names the table
-- by its row type), and a NULL key looks up the NULL group.  anycompatible
-- rather than anyelement: the table's name in quotes resolves to text
-- instead of failing in the parser, so the function can say what to write.
CREATE FUNCTION cbt_lookup(cbt anycompatible, VARIADIC group_keys "any")
RETURNS SETOF anycompatible
AS 'MODULE_PATHNAME', 'cbt_lookup' LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 1;
COMMENT ON FUNCTION cbt_lookup(anycompatible, "any") IS 'one group of a cbt table, read from its root-to-leaf path: cbt_lookup(NULL::table, key, ...)';
