/* streamsketch -- external-memory streaming structures for PostgreSQL */

\echo Use "CREATE EXTENSION streamsketch" to load this file. \quit

-- Each structure's parameters live in a catalog table keyed by regclass
-- (bcms_params, ...).  A newer row for the same table replaces the older
-- one: CREATE TABLE records the GUC defaults, then a constructor such as
-- bcms_create() or a row restored by pg_restore wins.
CREATE FUNCTION streamsketch_params_replace() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE pg_catalog.format('DELETE FROM %I.%I WHERE relid = $1',
							  TG_TABLE_SCHEMA, TG_TABLE_NAME)
	USING NEW.relid;
	RETURN NEW;
END;
$$;
