/*-------------------------------------------------------------------------
 *
 * qf_legacy.c
 *	  The quotient filter area code of qf.c for the earlier area layout
 *	  ("QFA1": occupied, continuation, shifted and counter bit arrays, a
 *	  power of two of home slots), which tables and qfilter values written
 *	  by earlier builds hold.  qf.c and qf_check.c are compiled a second
 *	  time with QF_LEGACY, their public functions renamed; their public
 *	  functions of the current layout hand a geometry made by
 *	  qf_geom_init_legacy* over to these.
 *
 *-------------------------------------------------------------------------
 */
#define QF_LEGACY

#define qf_geom_init			qf_geom_init_legacy
#define qf_geom_init_slots		qf_geom_init_slots_legacy
#define qf_area_size			qf_legacy_area_size
#define qf_area_init			qf_legacy_area_init
#define qf_insert				qf_legacy_insert
#define qf_count_checked		qf_legacy_count_checked
#define qf_count				qf_legacy_count
#define qf_remove				qf_legacy_remove
#define qf_iter_init			qf_legacy_iter_init
#define qf_iter_next			qf_legacy_iter_next
#define qf_area_stats			qf_legacy_area_stats
#define qf_area_check			qf_legacy_area_check
#define qf_area_check_header	qf_legacy_area_check_header
#define qf_builder_init			qf_legacy_builder_init
#define qf_builder_add			qf_legacy_builder_add
#define qf_merge_areas			qf_legacy_merge_areas
#define qf_split_area			qf_legacy_split_area

#include "qf.c"
#include "qf_check.c"
