/* ---------------------------------------------------------------------
 * Guard rails: event triggers refusing the DDL that would silently empty
 * a structure or change what inserting into it means (src/storage/
 * ss_evtrigger.c).  Event triggers fire in every session, also before the
 * library is loaded, and see what a statement did through partitioned and
 * inheritance parents and composite types.  ENABLE ALWAYS: they fire with
 * session_replication_role = replica too.  Binary upgrade passes all.
 *
 * The functions are C and run no SQL, so nothing is looked up through
 * search_path on their behalf.  They do not pin search_path either: the
 * start and rewrite triggers resolve the names in the statement, which
 * must be resolved with the statement's own search_path.
 * ------------------------------------------------------------------- */

CREATE FUNCTION streamsketch_guard_start() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'streamsketch_guard_start' LANGUAGE C;
COMMENT ON FUNCTION streamsketch_guard_start() IS 'refuses rules, indexes, materialized views and ALTER TABLE forms on streamsketch structures before they run';

CREATE FUNCTION streamsketch_guard_rewrite() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'streamsketch_guard_rewrite' LANGUAGE C;
COMMENT ON FUNCTION streamsketch_guard_rewrite() IS 'refuses every rewrite of a streamsketch structure, and SET ACCESS METHOD to or from a streamsketch access method';

CREATE FUNCTION streamsketch_guard_end() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'streamsketch_guard_end' LANGUAGE C;
COMMENT ON FUNCTION streamsketch_guard_end() IS 'refuses column changes, triggers, rules, constraints, indexes and publication membership that a statement gave a streamsketch structure';

CREATE FUNCTION streamsketch_guard_drop() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'streamsketch_guard_drop' LANGUAGE C;
COMMENT ON FUNCTION streamsketch_guard_drop() IS 'refuses a DROP ... CASCADE that drops a column of a streamsketch structure, or of a type one of its columns uses, but not the structure';

CREATE FUNCTION streamsketch_follow_renames() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'streamsketch_follow_renames' LANGUAGE C;
COMMENT ON FUNCTION streamsketch_follow_renames() IS 'writes again the labels (the copies a dump restores) whose text a rename or a change of schema changed: a cbt''s definition names columns and objects it holds by their ids';

-- SECURITY LABEL is here only to load the library, which registers the
-- label provider, before PostgreSQL looks the provider up: it refuses
-- nothing.
CREATE EVENT TRIGGER streamsketch_guard_start ON ddl_command_start
	WHEN TAG IN ('CREATE RULE', 'CREATE INDEX', 'CREATE MATERIALIZED VIEW',
				 'REFRESH MATERIALIZED VIEW', 'ALTER TABLE', 'ALTER TYPE',
				 'ALTER MATERIALIZED VIEW', 'ALTER FOREIGN TABLE',
				 'SECURITY LABEL')
	EXECUTE FUNCTION streamsketch_guard_start();
ALTER EVENT TRIGGER streamsketch_guard_start ENABLE ALWAYS;

CREATE EVENT TRIGGER streamsketch_guard_rewrite ON table_rewrite
	EXECUTE FUNCTION streamsketch_guard_rewrite();
ALTER EVENT TRIGGER streamsketch_guard_rewrite ENABLE ALWAYS;

CREATE EVENT TRIGGER streamsketch_guard_end ON ddl_command_end
	WHEN TAG IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO',
				 'ALTER TABLE', 'ALTER TYPE', 'CREATE TRIGGER', 'CREATE RULE',
				 'CREATE INDEX', 'CREATE PUBLICATION', 'ALTER PUBLICATION',
				 'CREATE MATERIALIZED VIEW', 'REFRESH MATERIALIZED VIEW',
				 'ALTER MATERIALIZED VIEW', 'CREATE SCHEMA')
	EXECUTE FUNCTION streamsketch_guard_end();
ALTER EVENT TRIGGER streamsketch_guard_end ENABLE ALWAYS;

CREATE EVENT TRIGGER streamsketch_guard_drop ON sql_drop
	EXECUTE FUNCTION streamsketch_guard_drop();
ALTER EVENT TRIGGER streamsketch_guard_drop ENABLE ALWAYS;

-- A cbt's definition is bound by object ids; its label's text names them.
CREATE EVENT TRIGGER streamsketch_follow_renames ON ddl_command_end
	WHEN TAG IN ('ALTER AGGREGATE', 'ALTER COLLATION', 'ALTER DOMAIN',
				 'ALTER EXTENSION', 'ALTER FUNCTION', 'ALTER OPERATOR',
				 'ALTER PROCEDURE', 'ALTER ROUTINE', 'ALTER SCHEMA',
				 'ALTER TABLE', 'ALTER TYPE')
	EXECUTE FUNCTION streamsketch_follow_renames();
ALTER EVENT TRIGGER streamsketch_follow_renames ENABLE ALWAYS;
