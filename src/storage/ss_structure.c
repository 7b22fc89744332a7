/*-------------------------------------------------------------------------
 *
 * ss_structure.c
 *	  What the storage layer derives from a structure's descriptor
 *	  (ss_structure.h): the settings that give new structures their
 *	  parameters, the label's text and its parsing, the range checks that
 *	  labels and constructors share, and the uniqueness of the kinds and
 *	  page types that the descriptors claim.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "common/shortest_dec.h"
#include "lib/stringinfo.h"
#include "ss_page.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

/* ---- settings ---- */

/*
 * Every parameter setting's value lives in a slot here; its assign hook
 * (one per slot: a hook is not told which setting it serves) tells
 * ss_settings.c that the setting was assigned since the library loaded.
 */
#define SS_MAX_SETTINGS 64

typedef struct SettingSlot
{
	const SSParam *param;
	char	   *name;			/* "streamsketch.<setting>" */
	int			ival;			/* INT, ENUM */
	double		rval;			/* REAL */
	bool		bval;			/* BOOL */
	char	   *sval;			/* TEXT */
} SettingSlot;

static SettingSlot slots[SS_MAX_SETTINGS];
static int	nslots = 0;

#define SLOT_HOOKS(n, i) \
static void assign_int_##n(int v, void *e) { ss_setting_assigned(slots[i].name); } \
static void assign_real_##n(double v, void *e) { ss_setting_assigned(slots[i].name); } \
static void assign_bool_##n(bool v, void *e) { ss_setting_assigned(slots[i].name); } \
static void assign_text_##n(const char *v, void *e) { ss_setting_assigned(slots[i].name); }
#define SLOT_HOOKS8(r) \
	SLOT_HOOKS(r##0, (r - 1) * 8 + 0) SLOT_HOOKS(r##1, (r - 1) * 8 + 1) \
	SLOT_HOOKS(r##2, (r - 1) * 8 + 2) SLOT_HOOKS(r##3, (r - 1) * 8 + 3) \
	SLOT_HOOKS(r##4, (r - 1) * 8 + 4) SLOT_HOOKS(r##5, (r - 1) * 8 + 5) \
	SLOT_HOOKS(r##6, (r - 1) * 8 + 6) SLOT_HOOKS(r##7, (r - 1) * 8 + 7)

/* the hooks of slots 0..63, named by row (1..8) and column (0..7) */
SLOT_HOOKS8(1)
SLOT_HOOKS8(2)
SLOT_HOOKS8(3)
SLOT_HOOKS8(4)
SLOT_HOOKS8(5)
SLOT_HOOKS8(6)
SLOT_HOOKS8(7)
SLOT_HOOKS8(8)

#define SLOT_ROW(r, kind) kind##_##r##0, kind##_##r##1, kind##_##r##2, \
	kind##_##r##3, kind##_##r##4, kind##_##r##5, kind##_##r##6, kind##_##r##7
#define SLOT_TABLE(kind) { SLOT_ROW(1, kind), SLOT_ROW(2, kind), \
	SLOT_ROW(3, kind), SLOT_ROW(4, kind), SLOT_ROW(5, kind), \
	SLOT_ROW(6, kind), SLOT_ROW(7, kind), SLOT_ROW(8, kind) }

static const GucIntAssignHook int_hooks[SS_MAX_SETTINGS] = SLOT_TABLE(assign_int);
static const GucRealAssignHook real_hooks[SS_MAX_SETTINGS] = SLOT_TABLE(assign_real);
static const GucBoolAssignHook bool_hooks[SS_MAX_SETTINGS] = SLOT_TABLE(assign_bool);
static const GucStringAssignHook text_hooks[SS_MAX_SETTINGS] = SLOT_TABLE(assign_text);

/* Define the settings of s's parameters (called by _PG_init). */
void
ss_structure_define_settings(const SSStructure *s)
{
	for (int i = 0; i < s->nparams; i++)
	{
		const SSParam *p = &s->params[i];
		SettingSlot *slot;
		int			n;

		if (p->setting == SS_NO_SETTING)
			continue;
		if (nslots >= SS_MAX_SETTINGS)
			elog(ERROR, "streamsketch defines more than %d parameter settings",
				 SS_MAX_SETTINGS);
		n = nslots++;
		slot = &slots[n];
		slot->param = p;
		slot->name = MemoryContextStrdup(TopMemoryContext,
										 psprintf("streamsketch.%s", p->setting));
		switch (p->type)
		{
			case SS_PARAM_INT:
				{
					bool		own = p->setting_min != 0 || p->setting_max != 0;
					double		min = own ? p->setting_min : p->min;
					double		max = own ? p->setting_max : p->max;

					if (min < INT_MIN || max > INT_MAX)
						elog(ERROR, "setting %s needs a range of its own",
							 slot->name);
					DefineCustomIntVariable(slot->name, p->short_desc,
											p->long_desc, &slot->ival,
											(int) p->boot, (int) min,
											(int) max, PGC_USERSET,
											p->setting_flags, NULL,
											int_hooks[n], NULL);
				}
				break;
			case SS_PARAM_REAL:
				DefineCustomRealVariable(slot->name, p->short_desc,
										 p->long_desc, &slot->rval, p->boot,
										 p->setting_min, p->setting_max,
										 PGC_USERSET, p->setting_flags, NULL,
										 real_hooks[n], NULL);
				break;
			case SS_PARAM_BOOL:
				DefineCustomBoolVariable(slot->name, p->short_desc,
										 p->long_desc, &slot->bval,
										 p->boot != 0, PGC_USERSET,
										 p->setting_flags, NULL,
										 bool_hooks[n], NULL);
				break;
			case SS_PARAM_ENUM:
				DefineCustomEnumVariable(slot->name, p->short_desc,
										 p->long_desc, &slot->ival,
										 (int) p->boot, p->options,
										 PGC_USERSET, p->setting_flags, NULL,
										 int_hooks[n], NULL);
				break;
			case SS_PARAM_TEXT:
				DefineCustomStringVariable(slot->name, p->short_desc,
										   p->long_desc, &slot->sval,
										   p->boot_text, PGC_USERSET,
										   p->setting_flags, p->check_text,
										   text_hooks[n], NULL);
				break;
		}
	}
}

static SettingSlot *
param_slot(const SSParam *p)
{
	for (int i = 0; i < nslots; i++)
		if (slots[i].param == p)
			return &slots[i];
	elog(ERROR, "parameter \"%s\" has no setting", p->name);
	return NULL;				/* keep compiler quiet */
}

/* ---- a parameter's field ---- */

static void *
param_field(const SSParam *p, const void *st)
{
	return (char *) st + p->offset;
}

static int64
get_int(const SSParam *p, const void *st)
{
	const void *f = param_field(p, st);

	switch (p->size)
	{
		case 1:
			return p->is_signed ? (int64) *(const int8 *) f :
				(int64) *(const uint8 *) f;
		case 2:
			return p->is_signed ? (int64) *(const int16 *) f :
				(int64) *(const uint16 *) f;
		case 4:
			/* each branch as int64: a common type would be unsigned */
			return p->is_signed ? (int64) *(const int32 *) f :
				(int64) *(const uint32 *) f;
		case 8:
			return *(const int64 *) f;
	}
	elog(ERROR, "parameter \"%s\" has field size %d", p->name, p->size);
	return 0;					/* keep compiler quiet */
}

static void
set_int(const SSParam *p, void *st, int64 v)
{
	void	   *f = param_field(p, st);

	switch (p->size)
	{
		case 1:
			*(uint8 *) f = (uint8) v;
			return;
		case 2:
			*(uint16 *) f = (uint16) v;
			return;
		case 4:
			*(uint32 *) f = (uint32) v;
			return;
		case 8:
			*(int64 *) f = v;
			return;
	}
	elog(ERROR, "parameter \"%s\" has field size %d", p->name, p->size);
}

static const char *
enum_name(const SSParam *p, int value)
{
	for (const struct config_enum_entry *o = p->options; o->name; o++)
		if (o->val == value && !o->hidden)
			return o->name;
	elog(ERROR, "parameter \"%s\" has no option %d", p->name, value);
	return NULL;				/* keep compiler quiet */
}

/* 'a', 'b' or 'c': the options a user may give */
static char *
enum_choices(const SSParam *p)
{
	StringInfoData buf;
	int			n = 0;
	int			i = 0;

	for (const struct config_enum_entry *o = p->options; o->name; o++)
		n += !o->hidden;
	initStringInfo(&buf);
	for (const struct config_enum_entry *o = p->options; o->name; o++)
	{
		if (o->hidden)
			continue;
		if (i > 0)
			appendStringInfoString(&buf, i == n - 1 ? " or " : ", ");
		appendStringInfo(&buf, "'%s'", o->name);
		i++;
	}
	return buf.data;
}

static void
set_enum(const SSStructure *s, const SSParam *p, void *st, const char *value)
{
	for (const struct config_enum_entry *o = p->options; o->name; o++)
		if (pg_strcasecmp(o->name, value) == 0)
		{
			*(uint32 *) param_field(p, st) = (uint32) o->val;
			return;
		}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for %s parameter \"%s\": \"%s\"",
					s->name, p->name, value),
			 errhint("Use %s.", enum_choices(p))));
}

/* ---- label text ---- */

static void
label_error(const char *detail, const char *key)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid streamsketch parameter label"),
			 errdetail(detail, key),
			 errhint("A label lists every parameter as name=value, separated by spaces, as pg_seclabels shows for a table created by this version.")));
}

/*
 * Split label into the values of the nkeys names keys, in that order.
 * Every name must appear exactly once, and no other.  Words are separated
 * by white space, except inside a value's double quotes (an identifier
 * quoted as quote_identifier does).  The values are palloc'd.
 */
void
ss_label_split(const char *label, int nkeys, const char *const *keys,
			   char **values)
{
	const char *p = label;

	for (int i = 0; i < nkeys; i++)
		values[i] = NULL;
	for (;;)
	{
		const char *start;
		const char *eq = NULL;
		int			len;
		int			i;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		start = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n')
		{
			if (*p == '=' && eq == NULL)
				eq = p;
			/* a quoted identifier ("" inside) may hold spaces */
			if (*p == '"' && eq != NULL)
			{
				for (p++; *p && !(*p == '"' && p[1] != '"'); p++)
					if (*p == '"')
						p++;
				if (*p == '\0')
					label_error("\"%s\" has an unterminated quoted identifier.",
								pnstrdup(start, p - start));
			}
			p++;
		}
		if (eq == NULL || eq == start || eq + 1 == p)
			label_error("\"%s\" is not of the form name=value.",
						pnstrdup(start, p - start));
		len = eq - start;
		for (i = 0; i < nkeys; i++)
			if (strlen(keys[i]) == len && strncmp(keys[i], start, len) == 0)
				break;
		if (i == nkeys)
			label_error("Unknown parameter \"%s\".", pnstrdup(start, len));
		if (values[i] != NULL)
			label_error("Parameter \"%s\" appears twice.", keys[i]);
		values[i] = pnstrdup(eq + 1, p - eq - 1);
	}
	for (int i = 0; i < nkeys; i++)
		if (values[i] == NULL)
			label_error("Parameter \"%s\" is missing.", keys[i]);
}

double
ss_label_float(const char *key, const char *value)
{
	char	   *end;
	double		d;

	errno = 0;
	d = strtod(value, &end);
	if (*end != '\0' || errno != 0 || !isfinite(d))
		label_error("Parameter \"%s\" is not a finite number.", key);
	return d;
}

int64
ss_label_int(const char *key, const char *value, int64 min, int64 max)
{
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(value, &end, 10);
	if (*end != '\0' || errno != 0 || end == value || v < min || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid streamsketch parameter label"),
				 errdetail("Parameter \"%s\" must be an integer between " INT64_FORMAT " and " INT64_FORMAT ".",
						   key, min, max)));
	return (int64) v;
}

bool
ss_label_bool(const char *key, const char *value)
{
	bool		b;

	if (!parse_bool(value, &b))
		label_error("Parameter \"%s\" is not a boolean.", key);
	return b;
}

/* Append " key=v" with v in the shortest form that reads back exactly. */
void
ss_label_append_float(StringInfo buf, const char *key, double v)
{
	char		digits[DOUBLE_SHORTEST_DECIMAL_LEN];

	double_to_shortest_decimal_buf(v, digits);
	appendStringInfo(buf, "%s%s=%s", buf->len > 0 ? " " : "", key, digits);
}

/* ---- settings, labels, checks ---- */

/* An INT parameter's bound as an int64 (a double cannot hold INT64_MAX). */
static int64
int_bound(double d)
{
	if (d >= (double) PG_INT64_MAX)
		return PG_INT64_MAX;
	if (d <= (double) PG_INT64_MIN)
		return PG_INT64_MIN;
	return (int64) d;
}

/*
 * st's parameters from the settings (for a new table, and what a
 * constructor's NULL arguments take), checked.
 */
void
ss_params_from_settings(const SSStructure *s, Relation rel, void *st)
{
	for (int i = 0; i < s->nparams; i++)
	{
		const SSParam *p = &s->params[i];
		SettingSlot *slot;

		if (p->setting == SS_NO_SETTING)
		{
			if (p->type == SS_PARAM_REAL)
				*(double *) param_field(p, st) = p->boot;
			else if (p->type == SS_PARAM_BOOL)
				*(bool *) param_field(p, st) = p->boot != 0;
			else if (p->type != SS_PARAM_TEXT)
				set_int(p, st, (int64) p->boot);
			continue;
		}
		slot = param_slot(p);
		ss_check_setting(slot->name);
		switch (p->type)
		{
			case SS_PARAM_INT:
				set_int(p, st, slot->ival);
				break;
			case SS_PARAM_ENUM:
				*(uint32 *) param_field(p, st) = (uint32) slot->ival;
				break;
			case SS_PARAM_REAL:
				*(double *) param_field(p, st) = slot->rval;
				break;
			case SS_PARAM_BOOL:
				*(bool *) param_field(p, st) = slot->bval;
				break;
			case SS_PARAM_TEXT:
				p->from_text(slot->sval ? slot->sval : "", st);
				break;
		}
	}
	ss_params_check(s, rel, st, SS_PARAMS_SETTINGS);
}

/* st's parameters as a label, "name=value ..." in table order (palloc'd). */
char *
ss_params_to_label(const SSStructure *s, const void *st)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < s->nparams; i++)
	{
		const SSParam *p = &s->params[i];
		const void *f = param_field(p, st);

		if (p->type == SS_PARAM_REAL)
		{
			ss_label_append_float(&buf, p->name, *(const double *) f);
			continue;
		}
		appendStringInfo(&buf, "%s%s=", i > 0 ? " " : "", p->name);
		switch (p->type)
		{
			case SS_PARAM_INT:
				if (!p->is_signed && p->size == 8)
					appendStringInfo(&buf, UINT64_FORMAT, *(const uint64 *) f);
				else
					appendStringInfo(&buf, INT64_FORMAT, get_int(p, st));
				break;
			case SS_PARAM_BOOL:
				appendStringInfoString(&buf, *(const bool *) f ? "on" : "off");
				break;
			case SS_PARAM_ENUM:
				appendStringInfoString(&buf, enum_name(p, *(const uint32 *) f));
				break;
			case SS_PARAM_TEXT:
				appendStringInfoString(&buf, p->to_text(st));
				break;
			case SS_PARAM_REAL:
				break;
		}
	}
	return buf.data;
}

/* Parse a label (ss_label_split) into st's parameters, checked. */
void
ss_params_from_label(const SSStructure *s, Relation rel, const char *label,
					 void *st)
{
	const char **keys;
	char	  **values;

	keys = palloc(sizeof(char *) * s->nparams);
	values = palloc(sizeof(char *) * s->nparams);
	for (int i = 0; i < s->nparams; i++)
		keys[i] = s->params[i].name;
	ss_label_split(label, s->nparams, keys, values);
	for (int i = 0; i < s->nparams; i++)
	{
		const SSParam *p = &s->params[i];
		const char *v = values[i];

		switch (p->type)
		{
			case SS_PARAM_INT:
				set_int(p, st, ss_label_int(p->name, v, int_bound(p->min),
											int_bound(p->max)));
				break;
			case SS_PARAM_REAL:
				*(double *) param_field(p, st) = ss_label_float(p->name, v);
				break;
			case SS_PARAM_BOOL:
				*(bool *) param_field(p, st) = ss_label_bool(p->name, v);
				break;
			case SS_PARAM_ENUM:
				set_enum(s, p, st, v);
				break;
			case SS_PARAM_TEXT:
				p->from_text(v, st);
				break;
		}
	}
	pfree(keys);
	pfree(values);
	ss_params_check(s, rel, st, SS_PARAMS_LABEL);
}

/* kB as a setting would show it: "8MB" */
static char *
kb_text(int64 kb)
{
	if (kb != 0 && kb % (1024 * 1024) == 0)
		return psprintf(INT64_FORMAT "GB", kb / (1024 * 1024));
	if (kb != 0 && kb % 1024 == 0)
		return psprintf(INT64_FORMAT "MB", kb / 1024);
	return psprintf(INT64_FORMAT "kB", kb);
}

static void
range_error(const SSStructure *s, const SSParam *p, const char *value)
{
	if (p->type == SS_PARAM_INT && (p->setting_flags & GUC_UNIT_KB))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value %s out of bounds for %s parameter \"%s\"",
						value, s->name, p->name),
				 errdetail("Valid values are between %s and %s.",
						   kb_text(int_bound(p->min)),
						   kb_text(int_bound(p->max)))));
	if (p->type == SS_PARAM_INT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value %s out of bounds for %s parameter \"%s\"",
						value, s->name, p->name),
				 errdetail("Valid values are between " INT64_FORMAT " and " INT64_FORMAT ".",
						   int_bound(p->min), int_bound(p->max))));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("value %s out of bounds for %s parameter \"%s\"",
					value, s->name, p->name),
			 errdetail("Valid values are between %g and %g.", p->min, p->max)));
}

static void
check_ranges(const SSStructure *s, void *st, bool derived)
{
	for (int i = 0; i < s->nparams; i++)
	{
		const SSParam *p = &s->params[i];

		if (p->derived != derived)
			continue;
		if (p->type == SS_PARAM_INT)
		{
			int64		v = get_int(p, st);

			if (v < int_bound(p->min) || v > int_bound(p->max))
				range_error(s, p, psprintf(INT64_FORMAT, v));
		}
		else if (p->type == SS_PARAM_REAL && p->min < p->max)
		{
			double		v = *(double *) param_field(p, st);

			if (!(v >= p->min && v <= p->max))
				range_error(s, p, psprintf("%g", v));
		}
	}
}

/*
 * The range checks of the parameter table (a REAL parameter without a
 * range is checked by check_params alone), then the structure's own.
 * Derived parameters coming from the settings are computed by
 * check_params, and checked after it.
 */
void
ss_params_check(const SSStructure *s, Relation rel, void *st,
				SSParamSource source)
{
	check_ranges(s, st, false);
	if (source != SS_PARAMS_SETTINGS)
		check_ranges(s, st, true);
	if (s->check_params)
		s->check_params(rel, st, source);
	if (source == SS_PARAMS_SETTINGS)
		check_ranges(s, st, true);
}

const SSParam *
ss_param_find(const SSStructure *s, const char *name)
{
	for (int i = 0; i < s->nparams; i++)
		if (strcmp(s->params[i].name, name) == 0)
			return &s->params[i];
	elog(ERROR, "%s has no parameter \"%s\"", s->name, name);
	return NULL;				/* keep compiler quiet */
}

/* ---- the metapage's parameters ---- */

/*
 * The metapage contents of a new, empty structure with st's parameters:
 * zeros, the header (the hash seed is the "seed" parameter every structure
 * has) and the parameters.
 */
void
ss_meta_init(const SSStructure *s, const void *st, void *meta)
{
	memset(meta, 0, s->meta_size);
	ss_meta_header_init((SSMetaHeader *) meta, s->kind,
						(uint32) get_int(ss_param_find(s, "seed"), st),
						s->layout_end ? s->layout_end(st) : 1);
	memcpy((char *) meta + s->meta_params,
		   (const char *) st + s->state_params, s->params_size);
}

/* Copy the parameters of a checked metapage's contents into st. */
void
ss_params_from_meta(const SSStructure *s, const void *meta, void *st)
{
	memcpy((char *) st + s->state_params,
		   (const char *) meta + s->meta_params, s->params_size);
}

/* The metapage contents of a new structure, by its own init_meta if any. */
void
ss_new_meta(const SSStructure *s, const void *st, void *meta)
{
	if (s->init_meta)
		s->init_meta(st, meta);
	else
		ss_meta_init(s, st, meta);
}

/*
 * A TEXT parameter's argument of any type as text (its output function): a
 * size may be given as a number of rows or as '10GB'.
 */
static char *
argument_text(const SSStructure *s, const SSParam *p, Oid argtype, Datum d)
{
	Oid			outfunc;
	bool		isvarlena;
	char		category;
	bool		preferred;

	if (argtype == UNKNOWNOID || argtype == CSTRINGOID)
		return pstrdup(DatumGetCString(d));
	get_type_category_preferred(argtype, &category, &preferred);
	if (category != TYPCATEGORY_STRING && category != TYPCATEGORY_NUMERIC)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s parameter \"%s\" must be given as a number or a text, not %s",
						s->name, p->name, format_type_be(argtype))));
	getTypeOutputInfo(argtype, &outfunc, &isvarlena);
	return OidOutputFunctionCall(outfunc, d);
}

/*
 * A constructor's argument argno, if not NULL, as the parameter name of
 * st: a number, a boolean, or a text (an option's name, a size with a unit
 * as SET takes it, or the structure's own text form).  The range is
 * checked by ss_params_check once every argument is in.  False if the
 * argument is NULL (the parameter keeps its setting's value).
 */
bool
ss_param_from_arg(const SSStructure *s, const char *name,
				  FunctionCallInfo fcinfo, int argno, void *st)
{
	const SSParam *p = ss_param_find(s, name);
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Datum		d = PG_GETARG_DATUM(argno);

	if (PG_ARGISNULL(argno))
		return false;
	switch (p->type)
	{
		case SS_PARAM_INT:
			if (argtype == INT8OID || argtype == INT4OID || argtype == INT2OID)
			{
				int64		v = argtype == INT8OID ? DatumGetInt64(d) :
					argtype == INT4OID ? DatumGetInt32(d) : DatumGetInt16(d);

				/* before the store: a negative value must not wrap */
				if (v < int_bound(p->min) || v > int_bound(p->max))
					range_error(s, p, psprintf(INT64_FORMAT, v));
				set_int(p, st, v);
			}
			else
			{
				char	   *str = text_to_cstring(DatumGetTextPP(d));
				const char *hint = NULL;
				int			v;

				if (!parse_int(str, &v, p->setting_flags, &hint))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid value for %s parameter \"%s\": \"%s\"",
									s->name, p->name, str),
							 hint ? errhint("%s", hint) :
							 (p->setting_flags & GUC_UNIT_KB) ?
							 errhint("Use a size such as '8MB'.") : 0));
				if (v < p->min || v > p->max)
					range_error(s, p, str);
				set_int(p, st, v);
			}
			break;
		case SS_PARAM_REAL:
			*(double *) param_field(p, st) = DatumGetFloat8(d);
			break;
		case SS_PARAM_BOOL:
			*(bool *) param_field(p, st) = DatumGetBool(d);
			break;
		case SS_PARAM_ENUM:
			set_enum(s, p, st, text_to_cstring(DatumGetTextPP(d)));
			break;
		case SS_PARAM_TEXT:
			p->from_text(argument_text(s, p, argtype, d), st);
			break;
	}
	return true;
}

/*
 * A constructor's parameters: the settings, then, in the order of the
 * function's arguments, the arguments that give parameters (by their
 * names, SSParam.argument) and are not NULL, then the checks.
 */
void
ss_params_from_call(const SSStructure *s, FunctionCallInfo fcinfo, void *st)
{
	HeapTuple	proc = SearchSysCache1(PROCOID,
									   ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	Oid		   *argtypes;
	char	  **argnames;
	char	   *argmodes;
	int			nargs;

	if (!HeapTupleIsValid(proc))
		elog(ERROR, "cache lookup failed for function %u",
			 fcinfo->flinfo->fn_oid);
	nargs = get_func_arg_info(proc, &argtypes, &argnames, &argmodes);
	ReleaseSysCache(proc);
	ss_params_from_settings(s, NULL, st);
	for (int argno = 0; argno < nargs && argnames != NULL; argno++)
	{
		for (int i = 0; i < s->nparams; i++)
		{
			const SSParam *p = &s->params[i];

			if (p->argument != NULL && strcmp(p->argument, argnames[argno]) == 0)
				ss_param_from_arg(s, p->name, fcinfo, argno, st);
		}
	}
	ss_params_check(s, NULL, st, SS_PARAMS_CONSTRUCTOR);
}

/* ---- the list of structures ---- */

/*
 * The structure ops of each of the extension's table AM routines, registered
 * by their handlers, so that code that meets a relation (the label hook)
 * finds its structure.
 */
#define SS_MAX_ROUTINES 16

static struct
{
	const TableAmRoutine *routine;
	const SSStructure *ops;
}			registered[SS_MAX_ROUTINES];
static int	nregistered = 0;

void
ss_tableam_register(const TableAmRoutine *routine, const SSStructure *ops)
{
	for (int i = 0; i < nregistered; i++)
		if (registered[i].routine == routine)
			return;
	if (nregistered == SS_MAX_ROUTINES)
		elog(ERROR, "too many streamsketch table access methods");
	registered[nregistered].routine = routine;
	registered[nregistered].ops = ops;
	nregistered++;
}

/*
 * rel's structure ops, or NULL if rel does not use one of our access
 * methods (a materialized view can, if the guard's event triggers were
 * disabled when it was created).
 */
const SSStructure *
ss_structure_ops(Relation rel)
{
	if (rel->rd_tableam == NULL)
		return NULL;
	for (int i = 0; i < nregistered; i++)
		if (registered[i].routine == rel->rd_tableam)
			return registered[i].ops;
	return NULL;
}


/*
 * Every kind, name and page type is claimed once (a build with a clash
 * must not run); the metapage and change log pages, which every structure
 * has, belong to the storage layer and to no descriptor.
 */
void
ss_check_structures(const SSStructure *const *list, int n)
{
	for (int i = 0; i < n; i++)
	{
		const SSStructure *a = list[i];

		const SSParam *seed = ss_param_find(a, "seed");

		/* the storage layer's reads of the state's and metapage's fields */
		if (seed->type != SS_PARAM_INT || seed->size != sizeof(uint32) ||
			a->state_params + a->params_size > a->state_size ||
			a->meta_params < sizeof(SSMetaHeader) ||
			a->meta_params + a->params_size > a->meta_size)
			elog(ERROR, "the layout of %s's parameters is inconsistent",
				 a->name);
		for (int k = 0; k < a->npage_types; k++)
			if (a->page_types[k] == SS_PAGE_META ||
				a->page_types[k] == SS_PAGE_LOG)
				elog(ERROR, "%s claims the storage layer's page type %u",
					 a->name, a->page_types[k]);
		for (int j = 0; j < i; j++)
		{
			const SSStructure *b = list[j];

			if (a->kind == b->kind)
				elog(ERROR, "structures %s and %s have kind %u", a->name,
					 b->name, a->kind);
			if (strcmp(a->name, b->name) == 0)
				elog(ERROR, "structure name %s is given twice", a->name);
			for (int k = 0; k < a->npage_types; k++)
				for (int l = 0; l < b->npage_types; l++)
					if (a->page_types[k] == b->page_types[l])
						elog(ERROR, "structures %s and %s have page type %u",
							 a->name, b->name, a->page_types[k]);
		}
	}
}
