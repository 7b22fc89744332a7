/*-------------------------------------------------------------------------
 *
 * ss_params.c
 *	  Where a structure's parameters live besides its metapage.
 *
 * The metapage holds the parameters and is the truth: reads, writes and
 * TRUNCATE (which copies them to the new metapage) use nothing else.  A
 * copy is kept as the table's security label for the provider
 * "streamsketch" (pg_seclabel), a text such as
 *
 *		mode=buffered epsilon=0.0001 delta=0.01 width=27183 ...
 *
 * only so that a dump restores them: pg_dump emits
 * SECURITY LABEL FOR streamsketch ON TABLE ... IS '...' with the table's
 * definition in every form (whole database, -t, -s, custom or plain, and
 * the binary-upgrade dump of pg_upgrade), after the CREATE TABLE that
 * created the structure with the restoring session's settings.  A catalog
 * table could not do that (-t and -s do not dump extension configuration
 * tables), and a label needs none of what made one dangerous: only the
 * table's owner can set it (PostgreSQL checks that before calling our
 * hook), it is never replicated, and it goes away with its table.
 *
 * Setting the label (ss_label_check) validates it with the constructors'
 * range checks.  It is accepted if it names the parameters the metapage
 * already has, or, on a structure that was never written (a restore),
 * gives the structure a new, empty relfilenode whose metapage has the
 * label's parameters; otherwise it is refused: a label never overrides an
 * existing metapage.
 *
 * Also here: creating a structure with explicit parameters (the
 * constructors' CREATE TABLE), and the structure's state (parameters and
 * column info) cached in rd_amcache, checked against the label.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "commands/comment.h"
#include "commands/dbcommands.h"
#include "commands/seclabel.h"
#include "common/shortest_dec.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "parser/parse_type.h"
#include "parser/parser.h"
#include "parser/scanner.h"
#include "common/keywords.h"
#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/ruleutils.h"
#include "utils/guc.h"
#include "utils/varlena.h"
#include "utils/guc_tables.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "ss_pending.h"

/* ---- labels ---- */

static ObjectAddress
relation_address(Oid relid)
{
	ObjectAddress addr;

	ObjectAddressSet(addr, RelationRelationId, relid);
	return addr;
}

/* Record label as relid's parameters (no permission check: our callers
 * are creating the table). */
void
ss_set_label(Oid relid, const char *label)
{
	ObjectAddress addr = relation_address(relid);

	SetSecurityLabel(&addr, SS_LABEL_PROVIDER, label);
}

/*
 * The table's comment, which \dt+ shows: its kind and parameters, as its
 * label names them ("bcms: mode buffered, epsilon 0.0001, ..."), without
 * the hash seed and what only the label needs (a cbt's definition, which
 * cbt_info shows).  Written when the table gets its parameters (creation,
 * a label given to a table never written), like the label.
 */
void
ss_describe(Relation rel, const SSStructure *ops, const void *st)
{
	char	   *label = ss_params_to_label(ops, st);
	StringInfoData buf;
	char	   *word;
	char	   *save = NULL;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s:", ss_structure_name(rel));
	for (word = strtok_r(label, " ", &save); word != NULL;
		 word = strtok_r(NULL, " ", &save))
	{
		char	   *eq = strchr(word, '=');

		if (eq == NULL)
			continue;
		*eq = '\0';
		if (ss_param_find(ops, word)->internal)
			continue;
		appendStringInfo(&buf, "%s %s %s", buf.data[buf.len - 1] == ':' ? "" : ",",
						 word, eq + 1);
	}
	CreateComments(RelationGetRelid(rel), RelationRelationId, 0, buf.data);
	pfree(buf.data);
	pfree(label);
}

/* relid's label, or NULL. */
char *
ss_get_label(Oid relid)
{
	ObjectAddress addr = relation_address(relid);

	return GetSecurityLabel(&addr, SS_LABEL_PROVIDER);
}

/* Never written: only the metapage exists, and nothing is pending. */
static bool
ss_structure_is_pristine(Relation rel)
{
	return RelationGetNumberOfBlocks(rel) <= 1 &&
		!ss_pending_has(RelationGetRelid(rel));
}

/* Parameters set by a SECURITY LABEL statement, for ss_set_new_filenode. */
static Oid	relabel_relid = InvalidOid;
static const void *relabel_state = NULL;

/*
 * The provider's hook, called by SECURITY LABEL FOR streamsketch after
 * PostgreSQL checked that the caller owns the table.
 */
static void
ss_label_check(const ObjectAddress *object, const char *seclabel)
{
	Relation	rel;
	const SSStructure *ops;
	void	   *st;
	char	   *wanted;
	char	   *current;

	if (object->classId != RelationRelationId || object->objectSubId != 0 ||
		get_rel_relkind(object->objectId) != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("streamsketch labels apply to streamsketch tables only")));

	/*
	 * pg_upgrade: the relation's files, metapage included, come along;
	 * only what the parameters make the table depend on is recorded again
	 */
	if (IsBinaryUpgrade)
	{
		rel = relation_open(object->objectId, AccessExclusiveLock);
		ops = ss_structure_ops(rel);
		if (ops != NULL && ops->label_set != NULL && seclabel != NULL)
		{
			st = palloc0(ops->state_size);
			ss_params_from_label(ops, rel, seclabel, st);
			ops->label_set(rel, st);
		}
		relation_close(rel, NoLock);
		return;
	}

	/* a new relfilenode needs what TRUNCATE takes */
	rel = relation_open(object->objectId, AccessExclusiveLock);
	ops = ss_structure_ops(rel);
	if (ops == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a streamsketch table",
						RelationGetRelationName(rel)),
				 errdetail("streamsketch labels hold the parameters of streamsketch tables.")));
	if (seclabel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the parameters label of streamsketch table \"%s\" cannot be removed",
						RelationGetRelationName(rel)),
				 errdetail("pg_dump restores the table's parameters from it.")));

	st = palloc0(ops->state_size);
	ops->check_columns(rel, st);
	ss_params_from_label(ops, rel, seclabel, st);
	wanted = ss_params_to_label(ops, st);
	current = ss_params_to_label(ops, ss_get_state(rel, ops));
	if (strcmp(wanted, current) != 0)
	{
		if (!ss_structure_is_pristine(rel))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot change the parameters of streamsketch table \"%s\"",
							RelationGetRelationName(rel)),
					 errdetail("The table has been written to, and its parameters are \"%s\".",
							   current),
					 errhint("Parameters can only be set on a table that was never written to; TRUNCATE it first, or create a new one.")));

		/* as TRUNCATE does, with the label's parameters */
		relabel_relid = RelationGetRelid(rel);
		relabel_state = st;
		PG_TRY();
		{
			RelationSetNewRelfilenode(rel, rel->rd_rel->relpersistence);
		}
		PG_FINALLY();
		{
			relabel_relid = InvalidOid;
			relabel_state = NULL;
		}
		PG_END_TRY();
	}
	if (ops->label_set != NULL)
		ops->label_set(rel, st);
	relation_close(rel, NoLock);
}

/*
 * Is a SECURITY LABEL statement giving relid new parameters right now?
 * Its new metapage is written before PostgreSQL stores the new label.
 */
bool
ss_relabel_in_progress(Oid relid)
{
	return OidIsValid(relabel_relid) && relabel_relid == relid;
}

/* ---- column lists given as text ---- */

void
ss_user_text_error_callback(void *arg)
{
	SSUserText *pos = (SSUserText *) arg;
	int			cursor = geterrposition();
	int			len = (int) strlen(pos->text);

	if (cursor <= 0)
		return;
	/* a character of ours before or after the text: its first or its end */
	cursor = Min(Max(cursor - pos->offset, 1), len + 1);
	errposition(0);
	internalerrposition(cursor);
	internalerrquery(pos->text);
}

/*
 * Refuse a list that closes the parenthesis it is put in, or ends the
 * statement: "k int) ON COMMIT DROP" or "k int); --" would otherwise
 * parse as a table with options, or lose the rest to a comment.  The
 * list's tokens, as the parser sees them, must keep their parentheses
 * balanced and hold no semicolon.
 */
static void
check_list_is_enclosed(const char *list, const char *what, const char *hint)
{
	core_yy_extra_type extra;
	core_YYSTYPE yylval;
	YYLTYPE		yylloc;
	core_yyscan_t scanner;
	int			depth = 0;
	int			token;

	scanner = scanner_init(list, &extra, &ScanKeywords, ScanKeywordTokens);
	while ((token = core_yylex(&yylval, &yylloc, scanner)) != 0)
	{
		if (token == '(')
			depth++;
		else if (token == ')')
			depth--;
		if (depth < 0 || token == ';')
		{
			scanner_finish(scanner);
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("invalid %s \"%s\"", what, list),
					 errdetail("It has %s at position %d.",
							   token == ';' ? "a semicolon" : "an unmatched closing parenthesis",
							   yylloc + 1),
					 errhint("%s", hint)));
		}
	}
	scanner_finish(scanner);
	if (depth != 0)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid %s \"%s\"", what, list),
				 errdetail("It has an unmatched opening parenthesis."),
				 errhint("%s", hint)));
}

/*
 * A column list as CREATE TABLE takes it ('url text, day date'), parsed,
 * never pasted into a statement: each entry a name and a type (with a
 * COLLATE clause at most).  what names the argument in errors; hint says
 * what to write.  Returns the ColumnDefs.
 */
List *
ss_parse_column_list(const char *list, const char *what, const char *hint)
{
	static const char prefix[] = "CREATE TABLE ss_columns (";
	/* a newline before the parenthesis: a trailing comment cannot hide it */
	char	   *sql = psprintf("%s%s\n)", prefix, list);
	SSUserText	pos = {list, 0};
	ErrorContextCallback callback;
	List	   *raw;
	CreateStmt *cs;
	ListCell   *lc;

	callback.callback = ss_user_text_error_callback;
	callback.arg = &pos;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	pos.offset = 0;
	check_list_is_enclosed(list, what, hint);
	pos.offset = sizeof(prefix) - 1;
	raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	error_context_stack = callback.previous;

	if (list_length(raw) != 1 ||
		!IsA(linitial_node(RawStmt, raw)->stmt, CreateStmt))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("invalid %s \"%s\"", what, list),
				 errhint("%s", hint)));
	cs = (CreateStmt *) linitial_node(RawStmt, raw)->stmt;
	if (cs->inhRelations || cs->partbound || cs->partspec || cs->ofTypename ||
		cs->constraints || cs->options || cs->tablespacename ||
		cs->accessMethod || cs->tableElts == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("invalid %s \"%s\"", what, list),
				 errhint("%s", hint)));
	foreach(lc, cs->tableElts)
	{
		ColumnDef  *cd = (ColumnDef *) lfirst(lc);

		if (!IsA(cd, ColumnDef) || cd->constraints || cd->raw_default ||
			cd->identity || cd->generated || cd->is_from_type)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("each entry of the %s is a column name and a type", what),
					 errdetail("\"%s\" has more.", list)));
	}
	return cs->tableElts;
}

/*
 * The columns of a parsed list (ss_parse_column_list) as the column list
 * of a CREATE TABLE built from catalog lookups: names quoted, types and
 * collations schema-qualified.  The types are resolved with the caller's
 * search_path, as CREATE TABLE would.
 */
char *
ss_column_list_sql(List *coldefs, Oid *types)
{
	StringInfoData sql;
	ListCell   *lc;
	int			i = 0;

	initStringInfo(&sql);
	foreach(lc, coldefs)
	{
		ColumnDef  *cd = (ColumnDef *) lfirst(lc);
		Oid			typid;
		int32		typmod;

		typenameTypeIdAndMod(NULL, cd->typeName, &typid, &typmod);
		if (types)
			types[i] = typid;
		appendStringInfo(&sql, "%s%s %s", i > 0 ? ", " : "",
						 quote_identifier(cd->colname),
						 format_type_extended(typid, typmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN |
											  FORMAT_TYPE_FORCE_QUALIFY));
		if (cd->collClause)
			appendStringInfo(&sql, " COLLATE %s",
							 generate_collation_name(LookupCollation(NULL, cd->collClause->collname, -1)));
		i++;
	}
	return sql.data;
}

/* ---- creating a structure with given parameters ---- */

static struct
{
	const SSStructure *ops;
	const void *st;
	const char *relname;
	Oid			relid;			/* set when consumed */
}			creation;

/*
 * The constructors' CREATE TABLE: name (possibly schema-qualified)
 * (key keytype [, second_column bigint]) USING amname, [UNLOGGED,] with a
 * metapage made from st's parameters instead of the settings.  Returns
 * the new table's OID.
 */
Oid
ss_create_structure(const SSStructure *ops, const void *st, text *name,
					Oid keytype, const char *second_column,
					const char *amname, bool unlogged)
{
	StringInfoData cols;

	initStringInfo(&cols);
	appendStringInfo(&cols, "key %s", format_type_be_qualified(keytype));
	if (second_column)
		appendStringInfo(&cols, ", %s pg_catalog.int8",
						 quote_identifier(second_column));
	return ss_create_structure_columns(ops, st, name, cols.data, amname,
									   unlogged);
}

/*
 * As ss_create_structure, with the column list given as SQL (every type
 * qualified, every name quoted as needed: the caller builds it from
 * catalog lookups, never from user text).
 */
Oid
ss_create_structure_columns(const SSStructure *ops, const void *st, text *name,
							const char *columns, const char *amname,
							bool unlogged)
{
	RangeVar   *rv = makeRangeVarFromNameList(textToQualifiedNameList(name));
	StringInfoData sql;
	Oid			relid;

	if (rv->catalogname &&
		strcmp(rv->catalogname, get_database_name(MyDatabaseId)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cross-database references are not implemented: %s",
						text_to_cstring(name))));

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE %sTABLE %s (%s) USING %s",
					 unlogged ? "UNLOGGED " : "",
					 quote_qualified_identifier(rv->schemaname, rv->relname),
					 columns, quote_identifier(amname));

	if (creation.ops != NULL)
		elog(ERROR, "nested streamsketch structure creation");
	creation.ops = ops;
	creation.st = st;
	creation.relname = rv->relname;
	creation.relid = InvalidOid;
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not create streamsketch table \"%s\"",
				 rv->relname);
		SPI_finish();
		relid = creation.relid;
	}
	PG_FINALLY();
	{
		memset(&creation, 0, sizeof(creation));
	}
	PG_END_TRY();
	if (!OidIsValid(relid))
		elog(ERROR, "streamsketch table \"%s\" was not created", rv->relname);
	return relid;
}

/*
 * The parameters that rel's new relfilenode gets from a constructor or a
 * SECURITY LABEL statement, or NULL (then: the settings for a new table,
 * the old metapage for TRUNCATE).
 */
const void *
ss_creation_params(Relation rel, const SSStructure *ops)
{
	if (OidIsValid(relabel_relid) && relabel_relid == RelationGetRelid(rel))
		return relabel_state;
	if (creation.ops == ops && !OidIsValid(creation.relid) &&
		strcmp(RelationGetRelationName(rel), creation.relname) == 0)
	{
		creation.relid = RelationGetRelid(rel);
		return creation.st;
	}
	return NULL;
}

void
ss_params_init(void)
{
	register_label_provider(SS_LABEL_PROVIDER, ss_label_check);
}

/* ---- the state cached in rd_amcache ---- */

/*
 * The metapage's parameters must be those of the table's label (the copy
 * pg_dump keeps, ss_params.c): the metapage checks can only tell whether
 * parameters are consistent, and a damaged hash seed, epsilon or capacity
 * that is still consistent would change every answer silently.  Checked
 * once per relcache entry, when the state is built, so it costs lookups
 * nothing.  Skipped for a table without a label (made before labels
 * existed), in binary-upgrade mode, and while a SECURITY LABEL statement
 * gives the table new parameters (the label is stored after the new
 * metapage).
 */
static void
ss_check_meta_against_label(Relation rel, const SSStructure *ops,
							const void *st)
{
	char	   *label;
	char	   *want = NULL;
	char	   *have = NULL;
	bool		agrees;

	if (IsBinaryUpgrade || ss_relabel_in_progress(RelationGetRelid(rel)))
		return;
	label = ss_get_label(RelationGetRelid(rel));
	if (label == NULL)
		return;
	if (ops->label_agrees != NULL)
		agrees = ops->label_agrees(rel, label, st);
	else
	{
		void	   *lst = palloc0(ops->state_size);

		ops->check_columns(rel, lst);
		ss_params_from_label(ops, rel, label, lst);
		want = ss_params_to_label(ops, lst);
		have = ss_params_to_label(ops, st);
		agrees = strcmp(want, have) == 0;
		pfree(lst);
	}
	if (!agrees)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("metapage (block 0) of %s table \"%s\" is corrupted",
						ss_structure_name(rel), RelationGetRelationName(rel)),
				 errdetail("The metapage's parameters \"%s\" differ from the table's label \"%s\".",
						   have ? have : ss_params_to_label(ops, st),
						   want ? want : label),
				 errhint("Restore the table from a backup, or TRUNCATE it to start over with the parameters of its label.")));
	if (have)
		pfree(have);
	if (want)
		pfree(want);
}

void *
ss_get_state(Relation rel, const SSStructure *ops)
{
	void	   *st;
	void	   *meta;

	if (rel->rd_amcache)
		return rel->rd_amcache;

	/* only the init fork of an unlogged relation exists on a standby */
	if (RecoveryInProgress() &&
		rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot access unlogged %s table \"%s\" during recovery",
						ss_structure_name(rel), RelationGetRelationName(rel)),
				 errdetail("An unlogged table is empty on a standby and is not replicated."),
				 errhint("Query it on the primary, or create it as a logged table.")));

	st = MemoryContextAllocZero(CacheMemoryContext, ops->state_size);
	meta = palloc(ops->meta_size);
	PG_TRY();
	{
		ops->check_columns(rel, st);
		if (!ss_read_structure_meta(rel, ops, meta))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("%s table \"%s\" has no metapage",
							ss_structure_name(rel), RelationGetRelationName(rel)),
					 errdetail("Block 0 is missing or all zeros."),
					 errhint("Restore the table from a backup, or TRUNCATE it to start over with the parameters of its label.")));
		if (ops->params_from_meta)
			ops->params_from_meta(meta, st);
		else
			ss_params_from_meta(ops, meta, st);
		ss_check_meta_against_label(rel, ops, st);
	}
	PG_CATCH();
	{
		pfree(st);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pfree(meta);
	rel->rd_amcache = st;
	return st;
}

void
ss_forget_state(Relation rel)
{
	if (rel->rd_amcache)
		pfree(rel->rd_amcache);
	rel->rd_amcache = NULL;
}
