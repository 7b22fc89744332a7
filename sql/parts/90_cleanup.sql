
/* ---------------------------------------------------------------------
 * Forget the parameters of dropped tables (every structure's catalog).
 * ------------------------------------------------------------------- */
CREATE FUNCTION streamsketch_drop_cleanup() RETURNS event_trigger
LANGUAGE plpgsql AS $$
DECLARE
	cat text;
BEGIN
	FOREACH cat IN ARRAY ARRAY['bcms_params', 'qf_params', 'bloom_params'] LOOP
		EXECUTE pg_catalog.format(
			'DELETE FROM @extschema@.%I p
			 USING pg_catalog.pg_event_trigger_dropped_objects() d
			 WHERE d.classid = ''pg_catalog.pg_class''::pg_catalog.regclass
			   AND d.objid = p.relid::pg_catalog.oid', cat);
	END LOOP;
END;
$$;
CREATE EVENT TRIGGER streamsketch_drop_cleanup ON sql_drop
	EXECUTE FUNCTION streamsketch_drop_cleanup();
