-- lookup_check(query): the query's plan (EXPLAIN, COSTS OFF), then
-- whether its answers with the lookup paths equal those with
-- streamsketch.enable_lookup_scan off (the scans'), and the answers.
-- Included by the regression tests of the plain SQL lookups.
CREATE FUNCTION lookup_check(q text) RETURNS SETOF text LANGUAGE plpgsql
SET search_path = public, pg_catalog AS $$
DECLARE
	r text;
	a text;
	b text;
BEGIN
	FOR r IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		RETURN NEXT r;
	END LOOP;
	EXECUTE format('SELECT string_agg(x::text, %L ORDER BY x::text) FROM (%s) x', ' | ', q) INTO a;
	SET LOCAL streamsketch.enable_lookup_scan = off;
	EXECUTE format('SELECT string_agg(x::text, %L ORDER BY x::text) FROM (%s) x', ' | ', q) INTO b;
	SET LOCAL streamsketch.enable_lookup_scan = on;
	RETURN NEXT CASE WHEN a IS NOT DISTINCT FROM b THEN 'same: ' || coalesce(a, '(none)')
				ELSE 'DIFFERENT: ' || coalesce(a, '(none)') || ' vs ' || coalesce(b, '(none)') END;
END $$;
