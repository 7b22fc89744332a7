/*-------------------------------------------------------------------------
 *
 * ss_catalog.c
 *	  The extension's catalog tables of structure parameters.
 *
 * Parameters are frozen into each structure's metapage, and also recorded
 * in a per-kind catalog table keyed by regclass (e.g. bcms_params) that is
 * registered with pg_extension_config_dump, so pg_dump keeps them and the
 * lazily created metapage (after TRUNCATE, an unlogged reset or a restore)
 * gets the same parameters back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

/* pg_extension.extnamespace of extoid (PostgreSQL 15 has no helper) */
static Oid
extension_namespace(Oid extoid)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

const SSStructureInfo ss_structures[] = {
	{"bcms", "bcms_params"},
	{"quotient_filter", "qf_params"},
	{"buffered_quotient_filter", "qf_params"},
	{"cascade_filter", "qf_params"},
	{"bloom_filter", "bloom_params"},
	{NULL, NULL}
};

const char *
ss_extension_schema(void)
{
	Oid			extoid = get_extension_oid("streamsketch", true);
	char	   *nspname;

	if (!OidIsValid(extoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"streamsketch\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION streamsketch.")));
	nspname = get_namespace_name(extension_namespace(extoid));
	return quote_identifier(nspname);
}

/* Remove every catalog row of relid (all kinds). */
void
ss_forget_params(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	const char *schema = ss_extension_schema();

	args[0] = ObjectIdGetDatum(relid);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	for (const SSStructureInfo *s = ss_structures; s->amname; s++)
	{
		char	   *sql = psprintf("DELETE FROM %s.%s WHERE relid = $1",
								   schema, s->params_table);

		if (SPI_execute_with_args(sql, 1, argtypes, args, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete streamsketch parameters of relation %u", relid);
		pfree(sql);
	}
	SPI_finish();
}
