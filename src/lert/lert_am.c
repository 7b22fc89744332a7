/*-------------------------------------------------------------------------
 *
 * lert_am.c
 *	  The `lert` table access method: handler, parameter table (whose
 *	  settings and label ss_structure.c derives), keys and INSERT.
 *
 * INSERT computes the key's fingerprint and appends one record (LertItem
 * and the key's bytes) to the transaction's pending log; at pre-commit
 * the log becomes a batch of the relation's change log, and
 * lert_consolidate() later counts committed observations and reports.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/pg_lzcompress.h"
#include "executor/tuptable.h"
#include "lert.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "ss_changelog.h"
#include "ss_hash.h"
#include "ss_pending.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(lert_handler);


/* bytes of level 0 per key a level-0 capacity is computed with */
#define LERT_LEVEL0_BYTES_PER_KEY	64

/*
 * Pages of a new level 0 of the form for limit entries with keys of about
 * avg_keylen bytes.  Keys spread over the pages by hash, so pages fill
 * unevenly: at LERT_LEVEL0_ROOM times what the entries take, the fullest
 * of thousands of pages is about four standard deviations above the mean
 * and still fits when level 0 reaches its limit; a page that fills first
 * only brings that flush forward.
 */
#define LERT_LEVEL0_ROOM	1.3

uint32
lert_level0_pages(int64 limit, uint16 form, double avg_keylen)
{
	double		per_entry = lert_l0_entry_space(form, (uint32) ceil(Max(avg_keylen, 0)));
	double		area = SS_PAGE_DATA_SIZE - MAXALIGN(sizeof(LertL0Header));
	double		pages = ceil(LERT_LEVEL0_ROOM * (double) Max(limit, 1) * per_entry / area);

	return (uint32) Min(Max(pages, 1), (double) (MaxBlockNumber / 4));
}

/* ---- parameters ---- */

/* Parse level thresholds (for g's nlevels) into tau[1..]; their count. */
static uint32
lert_parse_taus(const char *s, LertGeom *g)
{
	const char *p = s;
	uint32		n = 0;

	while (*p)
	{
		char	   *end;
		long long	v;

		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		errno = 0;
		v = strtoll(p, &end, 10);
		if (end == p || errno != 0 || v < 0 || n >= LERT_MAX_LEVELS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid LERT level thresholds \"%s\"", s),
					 errhint("Give one non-negative integer per on-disk level, such as '8,4,2', or '' for the defaults.")));
		g->tau[++n] = v;
		p = end;
	}
	if (n != 0 && n != g->nlevels)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%u LERT level thresholds given for %u on-disk levels", n,
						g->nlevels),
				 errhint("Give one threshold per level, or '' for the defaults.")));
	return n;
}

/*
 * The hint for parameters lert_geom_check refused, for the first thing it
 * found wrong.  A threshold T is at least 2; count_stretch and immediate
 * also keep every level threshold at least 1 and their sum below T, so
 * their smallest T is that sum plus one: with derived level thresholds
 * (halved down to 1 each until they fit), the number of levels plus one.
 */
static char *
lert_geom_hint(const LertGeom *g, bool derived_taus)
{
	bool		taus = (g->variant == LERT_COUNT_STRETCH ||
						g->variant == LERT_IMMEDIATE) &&
		g->nlevels >= 1 && g->nlevels <= LERT_MAX_LEVELS;
	bool		taus_below_1 = false;
	int64		min_threshold = 2;

	if (g->variant < LERT_COUNT_STRETCH || g->variant > LERT_CASCADE)
		return pstrdup("Use 'count_stretch', 'time_stretch', 'immediate' or 'cascade'.");
	if (taus && derived_taus)
		min_threshold = (int64) g->nlevels + 1;
	else if (taus)
	{
		for (uint32 i = 1; i <= g->nlevels; i++)
			taus_below_1 |= g->tau[i] < 1;
		if (!taus_below_1)
			min_threshold = Max(lert_tau_sum(g) + 1, 2);
	}
	if (g->threshold > PG_INT32_MAX)
		return psprintf("Use a threshold of at most %d.", PG_INT32_MAX);
	if (g->threshold >= 2)
	{
		/* lert_geom_check's order: the threshold's range came first */
		if (g->growth < 2 || g->growth > LERT_MAX_GROWTH)
			return psprintf("Use a growth factor from 2 to %d.", LERT_MAX_GROWTH);
		if (g->nlevels < 1 || g->nlevels > LERT_MAX_LEVELS)
			return psprintf("Use 1 to %d on-disk levels.", LERT_MAX_LEVELS);
		if (g->variant == LERT_TIME_STRETCH)
			return psprintf("Use 1 to %d age bits, with 2^age_bits at most level 0's capacity per cone (" INT64_FORMAT " keys).",
							LERT_MAX_AGE_BITS, g->level0_capacity);
		if (taus_below_1)
			return pstrdup("Give level thresholds of at least 1 each.");
	}
	if (taus && derived_taus)
		return psprintf("The %s variant with %u on-disk %s needs a threshold of at least " INT64_FORMAT ": each level threshold is at least 1 and their sum stays below the threshold.%s",
						lert_variant_name(g->variant), g->nlevels,
						g->nlevels == 1 ? "level" : "levels", min_threshold,
						g->nlevels > 1 ? " Use a larger threshold or fewer levels." : "");
	if (taus && !taus_below_1)
		return psprintf("The level thresholds add up to " INT64_FORMAT ": the threshold must be at least " INT64_FORMAT " (or give smaller level thresholds).",
						min_threshold - 1, min_threshold);
	return pstrdup("The threshold must be at least 2.");
}

/*
 * Validate the parameters and derive level 0's capacity per cone and, if
 * not given (tau[1] < 0), the level thresholds.
 */
static void
lert_derive(LertParams *p)
{
	const char *msg;
	LertGeom   *g = &p->geom;
	bool		derived_taus = false;

	if (p->ncones < 1 || p->ncones > LERT_MAX_CONES || (p->ncones & (p->ncones - 1)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a LERT cannot have %u cones", p->ncones),
				 errhint("Use a power of two from 1 to %d.", LERT_MAX_CONES)));
	if (p->buffer_kb < 64 || p->buffer_kb > LERT_MAX_BUFFER_KB)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("LERT level-0 size %u kB is out of range", p->buffer_kb),
				 errhint("Use a size from 64kB to 1GB.")));
	if (p->hash_bits < 1 || p->hash_bits > 64)
		elog(ERROR, "invalid LERT fingerprint width %u", p->hash_bits);
	g->level0_capacity = Max((int64) p->buffer_kb * 1024 / p->ncones /
							 LERT_LEVEL0_BYTES_PER_KEY, 16);
	if (g->nlevels >= 1 && g->nlevels <= LERT_MAX_LEVELS && g->tau[1] < 0)
	{
		/* the design notes' thresholds, halved until they fit below T */
		derived_taus = true;
		lert_default_taus(g->growth, g->nlevels, g->tau);
		while (lert_tau_sum(g) >= g->threshold && g->tau[1] > 1)
			for (uint32 j = 1; j <= g->nlevels; j++)
				g->tau[j] = Max(g->tau[j] / 2, 1);
	}
	if ((msg = lert_geom_check(g)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid LERT parameters: %s", msg),
				 errhint("%s", lert_geom_hint(g, derived_taus))));
	p->channel[LERT_CHANNEL_LEN - 1] = '\0';
}

/*
 * taus: the level thresholds, "8,4,2", one per on-disk level (the levels
 * parameter comes first in the table, so it is set when they are read);
 * '' (the setting's default): derived from the threshold and the growth
 * factor by lert_derive, again after a constructor changed those.
 */
static char *
lert_taus_to_text(const void *stp)
{
	const LertGeom *g = &((const LertState *) stp)->p.geom;
	StringInfoData buf;

	initStringInfo(&buf);
	for (uint32 j = 1; j <= g->nlevels; j++)
		appendStringInfo(&buf, "%s" INT64_FORMAT, j > 1 ? "," : "", g->tau[j]);
	return buf.data;
}

static void
lert_taus_from_text(const char *text, void *stp)
{
	LertState  *st = (LertState *) stp;

	memset(st->p.geom.tau, 0, sizeof(st->p.geom.tau));
	st->derive_taus = lert_parse_taus(text, &st->p.geom) == 0;
}

/*
 * notify: the channel, which a label writes as an identifier (quoted if
 * need be, "" for none) while the setting and lert_create take it as it
 * is.  from_text is not told which it reads, so it keeps the text and
 * lert_check_params, which is, reads it (lert_set_channel).
 */
static char *
lert_notify_to_text(const void *stp)
{
	const LertParams *p = &((const LertState *) stp)->p;

	return pstrdup(p->channel[0] ? quote_identifier(p->channel) : "\"\"");
}

static void
lert_notify_from_text(const char *text, void *stp)
{
	((LertState *) stp)->notify_text = pstrdup(text);
}

static void
lert_set_channel(LertParams *p, const char *channel, SSParamSource source)
{
	if (source == SS_PARAMS_LABEL && strcmp(channel, "\"\"") == 0)
		channel = "";
	else if (source == SS_PARAMS_LABEL && channel[0] == '"')
	{
		List	   *names;

		if (!SplitIdentifierString(pstrdup(channel), '.', &names) ||
			list_length(names) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid LERT notify channel %s", channel)));
		channel = linitial(names);
	}
	else if (source == SS_PARAMS_CONSTRUCTOR &&
			 strlen(channel) >= LERT_CHANNEL_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("LERT notify channel \"%s\" is too long", channel),
				 errhint("A channel name has at most %d bytes.", LERT_CHANNEL_LEN - 1)));
	/* the setting's longer names are cut, as they always were */
	memset(p->channel, 0, sizeof(p->channel));
	strlcpy(p->channel, channel, LERT_CHANNEL_LEN);
}

/* (key anytype [, count smallint|integer|bigint]) */
static void
lert_state_columns(Relation rel, void *stp)
{
	SSKeyColumns cols;
	LertState  *st = (LertState *) stp;

	ss_check_key_columns(RelationGetDescr(rel), RelationGetRelationName(rel),
						 "lert", "count", &cols);
	if (st)
	{
		st->keytype = cols.keytype;
		st->keylen = cols.keylen;
		st->keybyval = cols.keybyval;
		st->inttype = cols.inttype;
	}
}

/* The planner's row estimate: the reports (a scan's rows). */
static double
lert_estimate_rows(const void *metap)
{
	return (double) ((const LertMeta *) metap)->nreports;
}

/*
 * The invariants of a LERT metapage the code relies on: parameters in
 * range and derived as lert_derive does, every extent inside the blocks
 * reserved so far, counters in range.
 */
void
lert_check_meta(Relation rel, const void *metap)
{
	const LertMeta *meta = (const LertMeta *) metap;
	LertParams	d = meta->params;
	BlockNumber end = meta->hdr.log.alloc_end;
	uint32		report_pages = 0;

#define EXTENT_OK(e) ((e).npages == 0 || \
	((e).start >= 1 && (e).start < end && (e).npages <= end - (e).start))

	if (meta->params.seed != meta->hdr.seed)
		elog(ERROR, "the parameters' seed %u differs from the header's %u",
			 meta->params.seed, meta->hdr.seed);
	lert_derive(&d);
	if (memcmp(&d, &meta->params, sizeof(d)) != 0)
		elog(ERROR, "the parameters differ from what they derive");
	if (meta->stream_pos < 0 || meta->nreports < 0 ||
		meta->nreport_ext > LERT_MAX_REPORT_EXTENTS ||
		meta->nfree > LERT_MAX_FREE_EXTENTS || meta->merges < 0)
		elog(ERROR, "a counter is out of range");
	if (meta->format > LERT_FORMAT_CURRENT)
		elog(ERROR, "the format %u is unknown", meta->format);
	for (uint32 i = 0; i < meta->nreport_ext; i++)
	{
		if (!EXTENT_OK(meta->report_ext[i]) || meta->report_ext[i].npages == 0)
			elog(ERROR, "report extent %u is out of range", i);
		report_pages += meta->report_ext[i].npages;
	}
	if ((meta->nreports > 0 || meta->report_tail > 0) &&
		meta->report_tail >= report_pages)
		elog(ERROR, "the report tail page %u is beyond the %u report pages",
			 meta->report_tail, report_pages);
	for (uint32 i = 0; i < meta->nfree; i++)
		if (!EXTENT_OK(meta->free_ext[i]) ||
			(meta->free_cone[i] >= meta->params.ncones &&
			 meta->free_cone[i] != LERT_FREE_POOL) ||
			(i > 0 && meta->free_ext[i].start <
			 meta->free_ext[i - 1].start + meta->free_ext[i - 1].npages))
			elog(ERROR, "free extent %u is out of range or order", i);
	if (meta->spill_cur > 1 || meta->nspill > LERT_MAX_SPILL_UNTAGGED ||
		meta->spill_blk[0] >= end || meta->spill_blk[1] >= end ||
		(meta->spill_blk[0] != 0 && meta->spill_blk[0] == meta->spill_blk[1]) ||
		(meta->nspill > 0 && meta->spill_blk[meta->spill_cur] == 0))
		elog(ERROR, "the spill page of the free extents is out of range");
	for (uint32 c = 0; c < meta->params.ncones; c++)
	{
		const LertCone *cone = &meta->cones[c];

		if (!EXTENT_OK(cone->level0) || cone->level0_entries < 0 ||
			cone->level0_limit < 1 || cone->last_flush < 0 ||
			cone->last_flush > meta->stream_pos + PG_INT64_MAX / 4)
			elog(ERROR, "cone %u's level 0 is out of range", c);
		/* a cone past the head stands on a log page, ahead of the head */
		if (cone->next_gen < 1 || cone->next_gen > PG_UINT64_MAX / LERT_MAX_CONES ||
			(cone->log_pos > meta->hdr.log.head_pos &&
			 (cone->log_pos > meta->hdr.log.end_pos ||
			  cone->stream_pos < meta->stream_pos ||
			  cone->log_blk == SS_METAPAGE_BLKNO || cone->log_blk >= end)))
			elog(ERROR, "cone %u's log position is out of range", c);
		for (uint32 j = 1; j <= meta->params.geom.nlevels; j++)
		{
			const LertRun *run = &cone->runs[j];

			if (!EXTENT_OK(run->index) || run->nentries < 0 ||
				run->index.npages < lert_run_index_pages(run) ||
				(run->nkept == 0) !=
				(run->index.npages == lert_run_index_pages(run)) ||
				run->nkept > run->nentries ||
				(run->ndata == 0) != (run->nentries == 0))
				elog(ERROR, "cone %u's level %u is out of range", c, j);
		}
	}
#undef EXTENT_OK
}

/* streamsketch.test_lert_format (lert_init) */
static int	ss_test_lert_format = LERT_FORMAT_CURRENT;

/* ss_meta_init's contents, with the cones' schedules and empty levels */
static void
lert_init_meta(const void *st, void *metap)
{
	LertMeta   *m = (LertMeta *) metap;
	const LertParams *p = &((const LertState *) st)->p;
	uint64		deepest_period = 1;

	ss_meta_init(&lert_structure, st, m);
	m->format = (uint32) ss_test_lert_format;
	/* g^(L-1), the deepest level's period, in flushes (capped) */
	for (uint32 j = 2; j <= p->geom.nlevels &&
		 deepest_period <= PG_UINT32_MAX / LERT_MAX_GROWTH; j++)
		deepest_period *= p->geom.growth;
	for (uint32 c = 0; c < LERT_MAX_CONES; c++)
	{
		/*
		 * The cones fill at one rate, so under one schedule their merges
		 * into the deepest level would coincide, and with several sessions
		 * their working space be taken at once (four sessions on 96 M
		 * observations ended with as many pages free as in the levels).
		 * Cone c numbers its flushes from c / ncones of the deepest level's
		 * period: every level keeps its period, only its first merge comes
		 * sooner.
		 */
		if (c < p->ncones)
			m->cones[c].flush_offset = (uint32) (deepest_period * c / p->ncones);
		m->cones[c].next_gen = 1;
		m->cones[c].log_blk = InvalidBlockNumber;
		m->cones[c].level0.start = InvalidBlockNumber;
		m->cones[c].level0_limit = p->geom.level0_capacity;
		for (uint32 j = 0; j <= LERT_MAX_LEVELS; j++)
			m->cones[c].runs[j].index.start = InvalidBlockNumber;
	}
}

/* streamsketch.test_lert_hash_bits (lert_init) */
static int	ss_test_lert_hash_bits = 64;

/*
 * What the ranges cannot check, and what the parameters derive
 * (lert_derive).  hash_bits comes from a test-only setting (superuser
 * only, not in the sample file: lert_init), which the parameter table's
 * settings (anyone's) cannot be; the notify channel's text is read here,
 * where its source is known.  A notify text a SETTINGS round read is
 * taken then, so the one a CONSTRUCTOR round finds is the argument's.
 */
static void
lert_check_params(Relation rel, void *stp, SSParamSource source)
{
	LertState  *st = (LertState *) stp;
	LertParams *p = &st->p;

	if (source == SS_PARAMS_SETTINGS)
		p->hash_bits = (uint32) ss_test_lert_hash_bits;
	if (st->notify_text != NULL)
	{
		char	   *text = st->notify_text;

		st->notify_text = NULL;
		lert_set_channel(p, text, source);
		pfree(text);
	}
	if (st->derive_taus)
		p->geom.tau[1] = -1;
	lert_derive(p);
}

static const struct config_enum_entry lert_variant_options[] = {
	{"count_stretch", LERT_COUNT_STRETCH, false},
	{"time_stretch", LERT_TIME_STRETCH, false},
	{"immediate", LERT_IMMEDIATE, false},
	{"cascade", LERT_CASCADE, false},
	{NULL, 0, false}
};

/*
 * The parameters, in label order.  The threshold's range is what
 * lert_derive accepts at most (the setting's); its least value depends on
 * the variant and the levels, so lert_derive checks it, with a hint that
 * gives it.
 */
static const SSParam lert_params[] = {
	{.name = "variant", .argument = "variant", .type = SS_PARAM_ENUM,
		SS_FIELD(LertState, p.geom.variant), .options = lert_variant_options,
		.setting = "lert_variant",
		.short_desc = "Default variant of new lert tables.",
		.long_desc = "count_stretch: count at report below T + sum of the level thresholds; time_stretch: delay bounded by 1/(2^age_bits - 1) of the key's lifetime; immediate: reported at the T-th observation; cascade: no timeliness (the paper's baseline).",
	.boot = LERT_COUNT_STRETCH},
	{.name = "threshold", .argument = "threshold", .type = SS_PARAM_INT,
		SS_FIELD(LertState, p.geom.threshold), .is_signed = true,
		.min = 1, .max = PG_INT32_MAX,
		.setting = "lert_threshold",
		.short_desc = "Default reporting threshold T of new lert tables.",
		.long_desc = "A key is reported once its committed observations reach T.",
	.boot = 24},
	{.name = "age_bits", .argument = "age_bits", .type = SS_PARAM_INT,
		SS_FIELD(LertState, p.geom.age_bits), .min = 1,
		.max = LERT_MAX_AGE_BITS,
		.setting = "lert_age_bits",
		.short_desc = "Default age bits a of new time_stretch lert tables.",
		.long_desc = "Level 0 is flushed every 1/2^a of its capacity in observations; the time stretch is at most 1 + 1/(2^a - 1).",
	.boot = 1},
	{.name = "growth", .argument = "growth", .type = SS_PARAM_INT,
		SS_FIELD(LertState, p.geom.growth), .min = 2, .max = LERT_MAX_GROWTH,
		.setting = "lert_growth",
		.short_desc = "Default growth factor g of new lert tables.",
		.long_desc = "On-disk level i holds g^i times level 0's capacity.",
	.boot = 4},
	{.name = "levels", .type = SS_PARAM_INT,
		SS_FIELD(LertState, p.geom.nlevels), .min = 1, .max = LERT_MAX_LEVELS,
		.setting = "lert_levels",
		.short_desc = "Default number of on-disk levels of new lert tables.",
		.long_desc = "The last level takes any number of keys.",
	.boot = 3},
	{.name = "taus", .type = SS_PARAM_TEXT,
		.to_text = lert_taus_to_text, .from_text = lert_taus_from_text,
		.setting = "lert_taus",
		.short_desc = "Default level thresholds of new count_stretch and immediate lert tables.",
		.long_desc = "One count per on-disk level, such as '8,4,2'; empty: derived from the growth factor as in the design notes.",
	.boot_text = ""},
	{.name = "buffer_size_kb", .argument = "buffer_size", .type = SS_PARAM_INT,
		SS_FIELD(LertState, p.buffer_kb), .min = 64, .max = LERT_MAX_BUFFER_KB,
		.setting = "lert_buffer_size",
		.short_desc = "Default size of level 0 of new lert tables.",
		.long_desc = "Level 0 takes the observations in hot pages; its capacity is this size over 64 bytes per key.",
	.setting_flags = GUC_UNIT_KB, .boot = 4096},
	{.name = "cones", .argument = "cones", .type = SS_PARAM_INT, SS_FIELD(LertState, p.ncones),
		.min = 1, .max = LERT_MAX_CONES,
		.setting = "lert_cones",
		.short_desc = "Default number of cones (hash partitions) of new lert tables.",
		.long_desc = "Each cone has its own levels and merges, so a flush merges a fraction of the structure.",
	.boot = 1},
	{.name = "notify", .argument = "notify", .type = SS_PARAM_TEXT,
		.to_text = lert_notify_to_text, .from_text = lert_notify_from_text,
		.setting = "lert_notify",
		.short_desc = "Default NOTIFY channel of new lert tables.",
		.long_desc = "Empty: no notifications.  Otherwise every report also sends pg_notify(channel, key).",
	.boot_text = ""},
	{.name = "hash_bits", .type = SS_PARAM_INT, SS_FIELD(LertState, p.hash_bits),
	.min = 1, .max = 64, .boot = 64, .internal = true},
	{.name = "seed", .type = SS_PARAM_INT, SS_FIELD(LertState, p.seed),
	.min = 0, .max = PG_UINT32_MAX, .boot = SS_DEFAULT_SEED, .internal = true},
};

static void lert_init(void);
static bool lert_awaited(Relation rel);

static void lert_tuple_insert(Relation rel, TupleTableSlot *slot,
				CommandId cid, int options,
				struct BulkInsertStateData *bistate);

static const uint16 lert_page_types[] = {SS_PAGE_LERT_LEVEL0, SS_PAGE_LERT_RUN, SS_PAGE_LERT_INDEX, SS_PAGE_LERT_REPORT, SS_PAGE_LERT_FILTER, SS_PAGE_LERT_FREE};

const SSStructure lert_structure = {
	.name = "lert",
	.amname = "lert",
	.constructor = "lert_create()",
	SS_PAGE_TYPES(lert_page_types),
	.init = lert_init,
	.kind = SS_KIND_LERT,
	SS_LAYOUT(LertState, p, LertMeta, params),
	.consolidate = lert_consolidate,
	.consolidate_some = lert_consolidate_some,
	.awaited = lert_awaited,
	.stats_size = sizeof(LertStats),
	.add_stats = lert_add_stats,
	.check_columns = lert_state_columns,
	.check_meta = lert_check_meta,
	.estimate_rows = lert_estimate_rows,
	.init_meta = lert_init_meta,
	SS_PARAMS(lert_params),
	.check_params = lert_check_params,
	.scan = &lert_scan_ops,
	.paths = &lert_path_ops,
	.tuple_insert = lert_tuple_insert,
};

/* A LERT that notifies a channel wants its reports soon (ss_worker.c). */
static bool
lert_awaited(Relation rel)
{
	return lert_get_state(rel)->p.channel[0] != '\0';
}

LertState *
lert_get_state(Relation rel)
{
	LertState  *st = (LertState *) ss_get_state(rel, &lert_structure);

	/* the fingerprint is the key for fixed-size keys of at most 8 bytes */
	st->fixed_key = st->keylen > 0 && st->keylen <= 8 && st->p.hash_bits == 64;
	return st;
}

/* ---- keys ---- */

/* The fingerprint of a key's bytes (all of them, before any compression). */
static uint64
lert_bytes_fingerprint(const LertState *st, const char *b, Size n)
{
	uint64		fp = ss_hash_bytes(b, n, st->p.seed).h1;

	if (st->p.hash_bits < 64)
		fp &= ~(PG_UINT64_MAX >> st->p.hash_bits);
	return fp;
}

/*
 * The stored form of a long key (see LERT_INLINE_KEY_BYTES), palloc'd, or
 * NULL if it does not compress enough.
 */
static char *
lert_compress_key(const char *raw, Size n, uint32 *stored_len)
{
	/* compress whatever repeats; deterministic for given bytes */
	static const PGLZ_Strategy strategy = {
		0, LERT_MAX_LONG_KEY_BYTES, 0, INT_MAX, 128, 6
	};
	LertLongKey hdr;
	char	   *out;
	int32		clen;

	Assert(n > LERT_INLINE_KEY_BYTES);
	if (n > LERT_MAX_LONG_KEY_BYTES)
		return NULL;
	/* zeroed: the padding is part of the stored form */
	out = palloc0(sizeof(LertLongKey) + PGLZ_MAX_OUTPUT(n));
	clen = pglz_compress(raw, (int32) n, out + sizeof(LertLongKey), &strategy);
	if (clen < 0 || sizeof(LertLongKey) + clen > LERT_MAX_KEY_BYTES)
	{
		pfree(out);
		return NULL;
	}
	hdr.rawlen = (uint32) n;
	hdr.complen = (uint32) clen;
	memcpy(out, &hdr, sizeof(hdr));
	*stored_len = Max((uint32) (sizeof(LertLongKey) + clen), LERT_INLINE_KEY_BYTES + 1);
	return out;
}

/* A long key's varlena from its stored form; XX001 if that is damaged. */
static struct varlena *
lert_decompress_key(const char *stored, uint32 len)
{
	LertLongKey hdr;
	struct varlena *v;

	memcpy(&hdr, stored, sizeof(hdr));
	if (len <= LERT_INLINE_KEY_BYTES || len > LERT_MAX_KEY_BYTES ||
		hdr.complen > len - sizeof(hdr) ||
		hdr.rawlen <= LERT_INLINE_KEY_BYTES || hdr.rawlen > LERT_MAX_LONG_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a compressed LERT key is damaged"),
				 errdetail("It claims %u bytes compressed to %u in %u stored bytes.",
						   hdr.rawlen, hdr.complen, len)));
	v = palloc(VARHDRSZ + hdr.rawlen);
	SET_VARSIZE(v, VARHDRSZ + hdr.rawlen);
	if (pglz_decompress(stored + sizeof(hdr), (int32) hdr.complen, VARDATA(v),
						(int32) hdr.rawlen, true) != (int32) hdr.rawlen)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a compressed LERT key is damaged"),
				 errdetail("Its %u compressed bytes do not give %u bytes.",
						   hdr.complen, hdr.rawlen)));
	return v;
}

/*
 * The key's fingerprint, and the bytes stored with its entry (*bytes,
 * *len; none for a fixed key).  *free_bytes: *bytes was palloc'd.
 */
uint64
lert_key_fingerprint(const LertState *st, Datum key, char **bytes,
					 uint32 *len, bool *free_bytes)
{
	uint64		fp;
	Size		n;
	char	   *b;

	*free_bytes = false;
	if (st->fixed_key)
	{
		uint64		packed = 0;

		if (st->keybyval)
			store_att_byval(&packed, key, st->keylen);
		else
			memcpy(&packed, DatumGetPointer(key), st->keylen);
		*bytes = NULL;
		*len = 0;
		return lert_fixed_fingerprint(packed, st->p.seed);
	}
	if (st->keybyval)
	{
		b = palloc(sizeof(Datum));
		store_att_byval(b, key, st->keylen);
		n = st->keylen;
		*free_bytes = true;
	}
	else if (st->keylen > 0)
	{
		b = DatumGetPointer(key);
		n = st->keylen;
	}
	else if (st->keylen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(key));

		b = VARDATA_ANY(v);
		n = VARSIZE_ANY_EXHDR(v);
		*free_bytes = (Pointer) v != DatumGetPointer(key);
		if (*free_bytes)
		{
			/* keep a pointer that pfree accepts */
			char	   *copy = palloc(Max(n, 1));

			memcpy(copy, b, n);
			pfree(v);
			b = copy;
		}
	}
	else
	{
		b = DatumGetCString(key);
		n = strlen(b);
	}
	if (n > LERT_INLINE_KEY_BYTES)
	{
		uint32		stored_len;
		char	   *stored = st->keylen == -1 ? lert_compress_key(b, n, &stored_len) : NULL;

		if (stored == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a LERT key of %zu bytes is too long", n),
					 errdetail("Keys are stored whole with their counts so that two keys never share one: up to %u bytes as they are, longer ones compressed to at most %u bytes.",
							   LERT_INLINE_KEY_BYTES,
							   LERT_MAX_KEY_BYTES - (uint32) sizeof(LertLongKey)),
					 errhint("Insert a digest of the key, such as md5(key), instead.")));
		fp = lert_bytes_fingerprint(st, b, n);
		if (*free_bytes)
			pfree(b);
		*bytes = stored;
		*len = stored_len;
		*free_bytes = true;
		return fp;
	}
	*bytes = b;
	*len = (uint32) n;
	return lert_bytes_fingerprint(st, b, n);
}

/* A pass-by-value Datum from its typlen bytes (as store_att_byval wrote). */
static Datum
byval_datum(const char *b, int16 typlen)
{
	switch (typlen)
	{
		case 1:
			return CharGetDatum(*b);
		case 2:
			{
				int16		v;

				memcpy(&v, b, sizeof(v));
				return Int16GetDatum(v);
			}
		case 4:
			{
				int32		v;

				memcpy(&v, b, sizeof(v));
				return Int32GetDatum(v);
			}
		case 8:
			{
				int64		v;

				memcpy(&v, b, sizeof(v));
				return Int64GetDatum(v);
			}
	}
	elog(ERROR, "unsupported pass-by-value length %d", typlen);
	return (Datum) 0;
}

/* The key of an entry or report, as a Datum of the key type (palloc'd). */
Datum
lert_key_datum(const LertState *st, uint64 fp, const char *bytes, uint32 len)
{
	if (st->fixed_key)
	{
		uint64		packed = lert_fixed_key(fp, st->p.seed);

		if (st->keybyval)
			return byval_datum((const char *) &packed, st->keylen);
		else
		{
			char	   *b = palloc(st->keylen);

			memcpy(b, &packed, st->keylen);
			return PointerGetDatum(b);
		}
	}
	if (st->keybyval)
	{
		char		buf[sizeof(Datum)] = {0};

		memcpy(buf, bytes, Min(len, sizeof(buf)));
		return byval_datum(buf, st->keylen);
	}
	if (st->keylen > 0)
	{
		char	   *b = palloc(st->keylen);

		memcpy(b, bytes, Min(len, (uint32) st->keylen));
		return PointerGetDatum(b);
	}
	if (st->keylen == -1)
	{
		struct varlena *v;

		if (len > LERT_INLINE_KEY_BYTES)
			return PointerGetDatum(lert_decompress_key(bytes, len));
		v = palloc(VARHDRSZ + len);

		SET_VARSIZE(v, VARHDRSZ + len);
		memcpy(VARDATA(v), bytes, len);
		return PointerGetDatum(v);
	}
	{
		char	   *s = palloc(len + 1);

		memcpy(s, bytes, len);
		s[len] = '\0';
		return CStringGetDatum(s);
	}
}

/* ---- INSERT ---- */

/*
 * One row is one observation of its key, or `count` of them; rows with a
 * NULL key or count, or a count of 0, are skipped.
 */
static void
lert_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
				  int options, struct BulkInsertStateData *bistate)
{
	LertState  *st = lert_get_state(rel);
	int64		count = 1;
	char	   *bytes;
	uint32		len;
	bool		free_bytes;
	uint64		fp;
	char	   *rec;
	LertItem	item;

	pgstat_count_heap_insert(rel, 1);
	slot_getallattrs(slot);
	slot->tts_tableOid = RelationGetRelid(rel);
	ItemPointerSetInvalid(&slot->tts_tid);
	if (slot->tts_isnull[0])
		return;
	if (OidIsValid(st->inttype))
	{
		if (slot->tts_isnull[1])
			return;
		count = ss_int_datum(st->inttype, slot->tts_values[1]);
		if (count < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a LERT cannot take a negative count (" INT64_FORMAT ")", count),
					 errdetail("Observations cannot be taken back: a report may already be made.")));
		if (count == 0)
			return;
	}
	fp = lert_key_fingerprint(st, slot->tts_values[0], &bytes, &len, &free_bytes);
	memset(&item, 0, sizeof(item));
	item.fp = fp;
	item.count = count;
	item.keylen = len;
	rec = palloc(sizeof(item) + len);
	memcpy(rec, &item, sizeof(item));
	if (len > 0)
		memcpy(rec + sizeof(item), bytes, len);
	ss_pending_add(rel, SS_PENDING_ITEM, rec, (uint32) (sizeof(item) + len));
	pfree(rec);
	if (free_bytes)
		pfree(bytes);
}

Datum
lert_handler(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(ss_tableam_routine(&lert_structure));
}

/* ---- test-only settings (streamsketch.test_lert_*) ---- */

int			ss_test_lert_round_wait = 0;
int			ss_test_lert_free_extents = LERT_MAX_FREE_EXTENTS;

/* the names of the LertCrashPoints, by number */
static const char *const lert_crash_points[] = {
	"none", "merged", "reports_written", "installed", "writeback", "spilled",
	"reserved", NULL
};

SSTestCrash lert_crash = {
	.setting = "streamsketch.test_lert_crash",
	.short_desc = "Stops the server at a point of each LERT consolidation (for tests only).",
	.long_desc = "merged: a merge wrote its new levels; reports_written: an install wrote its report pages; installed: a checkpoint installed its metapage record; writeback: a checkpoint wrote one level-0 page back; spilled: a round wrote a new version of the spill page of free extents.",
	.during = "the consolidation",
	.points = lert_crash_points,
};

/* Called by _PG_init, after the parameters' settings are defined. */
static void
lert_init(void)
{
	ss_test_define_int("streamsketch.test_lert_hash_bits",
					   "Test only: fingerprint bits of keys of new lert tables.",
					   "Below 64, fingerprints are truncated to force collisions; every key is then stored with its bytes.",
					   &ss_test_lert_hash_bits, 64, 1, 64, NULL);
	ss_test_crash_define(&lert_crash);
	ss_test_define_int("streamsketch.test_lert_format",
					   "Test only: the format of new lert tables (LertMeta.format).",
					   "0 makes a table as an earlier version did, whose lookups of the count read the report stream.",
					   &ss_test_lert_format, LERT_FORMAT_CURRENT, 0,
					   LERT_FORMAT_CURRENT, NULL);
	ss_test_define_int("streamsketch.test_lert_round_wait",
					   "Makes each LERT cone's round wait, holding the cone's lock, until the advisory lock of this key is free (for tests only; 0: never).",
					   NULL, &ss_test_lert_round_wait, 0, 0, INT_MAX, NULL);
	ss_test_define_int("streamsketch.test_lert_free_extents",
					   "Test only: how many free extents of the pool the LERT metapage lists; the rest wait on its spill page.",
					   NULL, &ss_test_lert_free_extents, LERT_MAX_FREE_EXTENTS,
					   1, LERT_MAX_FREE_EXTENTS, NULL);
	lert_counts_init();
}
