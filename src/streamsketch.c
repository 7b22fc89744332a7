/*-------------------------------------------------------------------------
 *
 * streamsketch.c
 *	  Module entry point: GUCs (all under streamsketch.*), transaction
 *	  callbacks, utility guards and the parameters' label provider.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "bcms.h"
#include "bloom.h"
#include "fmgr.h"
#include "ss_pending.h"
#include "streamsketch.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

double		ss_bcms_epsilon = 0.0001;
double		ss_bcms_delta = 0.01;
int			ss_bcms_mode = BCMS_MODE_BUFFERED;
bool		ss_bcms_conservative = false;
int			ss_bcms_buffer_size_kb = 8192;
int			ss_pending_memory_kb = 4096;
int			ss_max_structure_size_mb = 64 * 1024;
int			ss_qf_capacity = 1000000;
double		ss_qf_fp_rate = 0.001;
int			ss_qf_fanout = 4;
int			ss_qf_buffer_size_kb = 8192;
int			ss_bloom_capacity = 1000000;
double		ss_bloom_fp_rate = 0.001;
int			ss_bloom_mode = BLOOM_MODE_LOCALIZED;
int			ss_bloom_buffer_size_kb = 8192;

static const struct config_enum_entry bcms_mode_options[] = {
	{"buffered", BCMS_MODE_BUFFERED, false},
	{"plain", BCMS_MODE_PLAIN, false},
	{NULL, 0, false}
};

static const struct config_enum_entry bloom_mode_options[] = {
	{"plain", BLOOM_MODE_PLAIN, false},
	{"elevator", BLOOM_MODE_ELEVATOR, false},
	{"localized", BLOOM_MODE_LOCALIZED, false},
	{NULL, 0, false}
};

/*
 * Assign hooks of the settings that give new structures their parameters:
 * an assignment after the library was loaded (SET, RESET) replaces a value
 * that was rejected when it loaded (ss_params.c).
 */
#define SS_ASSIGN_HOOK(setting, ctype) \
static void \
assign_##setting(ctype newval, void *extra) \
{ \
	ss_setting_assigned("streamsketch." #setting); \
}

SS_ASSIGN_HOOK(bcms_epsilon, double)
SS_ASSIGN_HOOK(bcms_delta, double)
SS_ASSIGN_HOOK(bcms_mode, int)
SS_ASSIGN_HOOK(bcms_conservative, bool)
SS_ASSIGN_HOOK(bcms_buffer_size, int)
SS_ASSIGN_HOOK(qf_capacity, int)
SS_ASSIGN_HOOK(qf_fp_rate, double)
SS_ASSIGN_HOOK(qf_fanout, int)
SS_ASSIGN_HOOK(qf_buffer_size, int)
SS_ASSIGN_HOOK(bloom_capacity, int)
SS_ASSIGN_HOOK(bloom_fp_rate, double)
SS_ASSIGN_HOOK(bloom_mode, int)
SS_ASSIGN_HOOK(bloom_buffer_size, int)

void		_PG_init(void);

void
_PG_init(void)
{
	/* settings SET before the library was loaded: see ss_params.c */
	ss_params_note_placeholders("streamsketch.");

	DefineCustomRealVariable("streamsketch.bcms_epsilon",
							 "Default error factor epsilon of new bcms tables.",
							 "Estimates exceed the true count by at most epsilon times the stream's total weight, with probability 1 - delta.  Width = ceil(e/epsilon).",
							 &ss_bcms_epsilon, 0.0001, 1e-12, 0.5,
							 PGC_USERSET, 0, NULL, assign_bcms_epsilon, NULL);
	DefineCustomRealVariable("streamsketch.bcms_delta",
							 "Default failure probability delta of new bcms tables.",
							 "Depth = ceil(ln(1/delta)).",
							 &ss_bcms_delta, 0.01, 1e-12, 0.5,
							 PGC_USERSET, 0, NULL, assign_bcms_delta, NULL);
	DefineCustomEnumVariable("streamsketch.bcms_mode",
							 "Default layout of new bcms tables.",
							 "buffered: hash-localized pages with in-page sub-buffers (the buffered count-min sketch); plain: the classic count-min sketch, one page per row hash.",
							 &ss_bcms_mode, BCMS_MODE_BUFFERED, bcms_mode_options,
							 PGC_USERSET, 0, NULL, assign_bcms_mode, NULL);
	DefineCustomBoolVariable("streamsketch.bcms_conservative",
							 "Default for conservative update in new buffered bcms tables.",
							 NULL,
							 &ss_bcms_conservative, false,
							 PGC_USERSET, 0, NULL, assign_bcms_conservative, NULL);
	DefineCustomIntVariable("streamsketch.bcms_buffer_size",
							"Default total size M of the sub-buffers of new buffered bcms tables.",
							"The sub-buffers live in the table's own pages and stay hot in shared_buffers; 0 disables buffering.",
							&ss_bcms_buffer_size_kb, 8192, 0, 64 * 1024 * 1024,
							PGC_USERSET, GUC_UNIT_KB, NULL, assign_bcms_buffer_size, NULL);
	DefineCustomIntVariable("streamsketch.pending_memory",
							"Memory a transaction's pending streamsketch changes may use before spilling to a temporary file.",
							NULL,
							&ss_pending_memory_kb, 4096, 64, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("streamsketch.max_structure_size",
							"Largest size a streamsketch structure may reach.",
							"Creating a structure whose parameters need more, and growing or writing a structure beyond it, fail.",
							&ss_max_structure_size_mb, 64 * 1024, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomIntVariable("streamsketch.qf_capacity",
							"Default expected number of keys of new quotient filter tables.",
							"The filter grows past it by resizing.",
							&ss_qf_capacity, 1000000, 1, INT_MAX,
							PGC_USERSET, 0, NULL, assign_qf_capacity, NULL);
	DefineCustomRealVariable("streamsketch.qf_fp_rate",
							 "Default false-positive rate of new quotient filter tables.",
							 NULL,
							 &ss_qf_fp_rate, 0.001, 1e-15, 0.5,
							 PGC_USERSET, 0, NULL, assign_qf_fp_rate, NULL);
	DefineCustomIntVariable("streamsketch.qf_fanout",
							"Default fanout (size ratio of consecutive levels) of new cascade filter tables.",
							"A power of two; larger fanouts mean fewer levels (faster lookups) and more rewriting (slower inserts).",
							&ss_qf_fanout, 4, 2, 1024,
							PGC_USERSET, 0, NULL, assign_qf_fanout, NULL);
	DefineCustomIntVariable("streamsketch.qf_buffer_size",
							"Default size of level 0 (the in-RAM level) of new buffered quotient filter and cascade filter tables.",
							"Level 0's pages are updated in place and stay hot in shared_buffers.",
							&ss_qf_buffer_size_kb, 8192, 8, 64 * 1024 * 1024,
							PGC_USERSET, GUC_UNIT_KB, NULL, assign_qf_buffer_size, NULL);
	DefineCustomIntVariable("streamsketch.bloom_capacity",
							"Default expected number of keys of new bloom_filter tables.",
							"Bits m = -capacity ln(fp_rate) / (ln 2)^2; a Bloom filter does not grow, its false-positive rate rises past the capacity.",
							&ss_bloom_capacity, 1000000, 1, INT_MAX,
							PGC_USERSET, 0, NULL, assign_bloom_capacity, NULL);
	DefineCustomRealVariable("streamsketch.bloom_fp_rate",
							 "Default false-positive rate of new bloom_filter tables.",
							 "Hash functions k = round(m/capacity ln 2).",
							 &ss_bloom_fp_rate, 0.001, 1e-15, 0.5,
							 PGC_USERSET, 0, NULL, assign_bloom_fp_rate, NULL);
	DefineCustomEnumVariable("streamsketch.bloom_mode",
							 "Default layout of new bloom_filter tables.",
							 "plain: the Bloom filter on disk, k random pages per insert; elevator: the same bits with a persistent insert buffer flushed in page order when full (EBF); localized: all k bits of a key in one page with per-page sub-buffers (BBF).",
							 &ss_bloom_mode, BLOOM_MODE_LOCALIZED, bloom_mode_options,
							 PGC_USERSET, 0, NULL, assign_bloom_mode, NULL);
	DefineCustomIntVariable("streamsketch.bloom_buffer_size",
							"Default insert buffer size M of new elevator and localized bloom_filter tables.",
							"The buffer lives in the table's own pages and stays hot in shared_buffers; 0 disables buffering.",
							&ss_bloom_buffer_size_kb, 8192, 0, 64 * 1024 * 1024,
							PGC_USERSET, GUC_UNIT_KB, NULL, assign_bloom_buffer_size, NULL);
	ss_params_find_rejected();
	MarkGUCPrefixReserved("streamsketch");

	ss_pending_init();
	ss_guard_init();
	ss_params_init();
}
