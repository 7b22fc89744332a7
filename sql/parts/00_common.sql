/* streamsketch -- external-memory streaming structures for PostgreSQL */

\echo Use "CREATE EXTENSION streamsketch" to load this file. \quit


CREATE FUNCTION streamsketch_log_info(structure regclass,
	OUT log_bytes bigint, OUT log_records bigint, OUT log_pages bigint,
	OUT free_log_pages bigint, OUT consolidations bigint,
	OUT relation_pages bigint)
AS 'MODULE_PATHNAME', 'streamsketch_log_info' LANGUAGE C STRICT STABLE PARALLEL SAFE;
COMMENT ON FUNCTION streamsketch_log_info(regclass) IS 'the change log of a streamsketch structure: unconsolidated bytes and records, its pages and free pages, rounds so far';

/* ---------------------------------------------------------------------
 * Background consolidation (src/storage/ss_worker.c): what operators see.
 * ------------------------------------------------------------------- */

CREATE FUNCTION streamsketch_log_state(relid oid,
	OUT log_bytes bigint, OUT log_records bigint, OUT log_pages bigint,
	OUT free_log_pages bigint, OUT consolidations bigint,
	OUT relation_pages bigint)
AS 'MODULE_PATHNAME', 'streamsketch_log_state' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION streamsketch_log_state(oid) IS 'streamsketch_log_info for the streamsketch_pending view: no privilege needed, no lock waited for, NULL for what is not a structure';

CREATE FUNCTION streamsketch_background_queue(OUT relation oid,
	OUT queued_since timestamptz, OUT last_commit timestamptz,
	OUT due timestamptz, OUT worker_pid int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamsketch_background_queue' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION streamsketch_background_queue() IS 'the structures of this database queued for background consolidation';

CREATE FUNCTION streamsketch_background_stats(OUT workers int,
	OUT rounds bigint, OUT errors bigint, OUT not_queued bigint)
AS 'MODULE_PATHNAME', 'streamsketch_background_stats' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION streamsketch_background_stats() IS 'background consolidation since the server started: workers running, structures consolidated, failed rounds, commits not queued';

CREATE VIEW streamsketch_pending AS
SELECT c.oid::pg_catalog.regclass AS relation, a.amname AS access_method,
       s.log_bytes, s.log_records, s.log_pages, s.free_log_pages,
       s.consolidations, s.relation_pages,
       q.queued_since, q.last_commit, q.due, q.worker_pid
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_am a ON a.oid = c.relam
  CROSS JOIN LATERAL @extschema@.streamsketch_log_state(c.oid) s
  LEFT JOIN @extschema@.streamsketch_background_queue() q ON q.relation = c.oid
 WHERE c.relkind OPERATOR(pg_catalog.=) 'r'
   AND a.amname OPERATOR(pg_catalog.=) ANY (ARRAY['bcms', 'bloom_filter',
       'quotient_filter', 'buffered_quotient_filter', 'cascade_filter',
       'lert', 'cbt', 'bfile']::pg_catalog.name[])
   AND s.log_bytes IS NOT NULL;
COMMENT ON VIEW streamsketch_pending IS 'every streamsketch structure of this database with its change log and its place in the background consolidation queue';
GRANT SELECT ON streamsketch_pending TO PUBLIC;

/* ---------------------------------------------------------------------
 * Progress of long operations (src/storage/ss_progress.c).
 * ------------------------------------------------------------------- */

CREATE FUNCTION streamsketch_progress(OUT pid int, OUT datid oid,
	OUT relid oid, OUT relation regclass, OUT operation text,
	OUT phase text, OUT done bigint, OUT total bigint, OUT unit text,
	OUT started_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamsketch_progress' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION streamsketch_progress() IS 'the long streamsketch operations running in every database: VACUUM, flush functions, qf_resize, consolidation rounds';

CREATE VIEW streamsketch_progress AS
SELECT p.pid, d.datname, p.relid, p.relation, p.operation, p.phase,
       p.done, p.total, p.unit, p.started_at
  FROM @extschema@.streamsketch_progress() p
  LEFT JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) p.datid;
COMMENT ON VIEW streamsketch_progress IS 'a row per backend running a long streamsketch operation, with its phase and the units done of the total';
GRANT SELECT ON streamsketch_progress TO PUBLIC;
