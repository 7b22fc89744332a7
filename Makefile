# streamsketch -- PGXS build
EXTENSION = streamsketch
EXTVERSION = 0.1

MODULE_big = streamsketch
# src/ has one folder per layer or structure family (docs/design.md)
SRC_DIRS = src src/storage src/bcms src/qf src/bloom src/lert src/cbt src/bfile
OBJS = $(patsubst %.c,%.o,$(sort $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c))))

# The extension script is assembled from one part per structure.
SQL_PARTS = $(sort $(wildcard sql/parts/*.sql))
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql

# Structures include the storage layer's headers and their own folder's;
# no folder includes another structure's.
PG_CPPFLAGS = -I$(srcdir)/src/storage -I$(libpq_srcdir)
SHLIB_LINK = -lmurmurhash -llz4
# libpq reads the answers of partitions on other servers, asked through
# postgres_fdw's connections (src/storage/ss_remote.c), as postgres_fdw does
SHLIB_LINK_INTERNAL = $(libpq)

REGRESS = $(sort $(filter-out $(EXTENSION)--%,$(basename $(notdir $(wildcard sql/*.sql)))))
REGRESS_OPTS = --load-extension=$(EXTENSION)

ISOLATION = $(basename $(notdir $(sort $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --outputdir=test/output_iso --load-extension=$(EXTENSION)

TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

EXTRA_CLEAN = test/output_iso results regression.diffs regression.out tmp_check

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies
$(OBJS): $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.h))
# the earlier area layout is qf.c compiled again
src/qf/qf_legacy.o: src/qf/qf.c src/qf/qf_check.c

sql/$(EXTENSION)--$(EXTVERSION).sql: $(SQL_PARTS)
	cat $^ > $@

# `make installcheck` runs pg_regress, the isolation tests and the TAP tests
# against the installed extension (scripts/test.sh runs every suite on a
# fresh machine); these targets run one suite.  TAP is forced on because
# some Debian builds of PGXS have it off.
.PHONY: installcheck-all installcheck-isolation installcheck-tap
installcheck-all: installcheck

installcheck-isolation:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)

installcheck-tap:
	$(MAKE) installcheck REGRESS= ISOLATION= enable_tap_tests=yes PROVE=prove
