#!/usr/bin/env bash
# Change-log benchmark: BEFORE (commit $BEFORE, default 0f8eaff,
# updates applied at pre-commit) against AFTER (this work tree, updates
# through the xid-stamped change log) for bcms (buffered, plain),
# bloom_filter (plain, elevator, localized) and the quotient filter family
# (quotient_filter, buffered_quotient_filter, cascade_filter).  Builds and installs each
# version into its own private PostgreSQL tree (/tmp/pgtree-before,
# /tmp/pgtree-after), runs one cluster per tree (ports 5691, 5692, under
# $WORK, default /tmp/ssbench-cl) and interleaves the measurements.
# Writes test/bench/changelog_bench_results.json, docs/bench-changelog.md
# and docs/bench-changelog.png.
#
# Usage (as root, from anywhere):   bash test/bench/changelog_bench.sh
# Parameters: environment variables, see C in changelog_bench.py
# (REPEATS=3 SIZES_MB=24,256 U10=200000 U100=20000 Q=20000 NCONS=50000 ...;
# QF_SIZES_MB=32,256 QF_FILL=... for the quotient filters); STRUCTS chooses
# the structures, MERGE=1 merges them into the existing results JSON, e.g.
#   STRUCTS=qf:quotient_filter,qf:buffered_quotient_filter,qf:cascade_filter \
#   MERGE=1 bash test/bench/changelog_bench.sh
# keeps the bcms/bloom_filter runs of the JSON and adds the quotient filters;
# BEFORE=<commit> chooses the BEFORE version (checked out as a detached
# worktree in /tmp/ssbench-before-src unless BEFORE_SRC names one).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-cl}
BEFORE=${BEFORE:-0f8eaff}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
[ "$(id -u)" = 0 ] || { echo "run as root (su postgres)" >&2; exit 1; }
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-matplotlib >/dev/null

if [ -z "${BEFORE_SRC:-}" ]; then
	BEFORE_SRC=/tmp/ssbench-before-src
	if [ ! -d "$BEFORE_SRC" ]; then
		git -C "$REPO" worktree add --detach "$BEFORE_SRC" "$BEFORE" >/dev/null
	fi
fi

install_tree() {    # SRC TREE
	local src=$1 tree=$2 d
	if [ ! -x "$tree$("$PG_CONFIG" --bindir)/postgres" ]; then
		for d in "$("$PG_CONFIG" --bindir)" "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)"; do
			mkdir -p "$tree$(dirname "$d")"
			cp -a "$d" "$tree$d"
		done
	fi
	rm -rf "$tree$("$PG_CONFIG" --pkglibdir)/bitcode" "$tree$("$PG_CONFIG" --pkglibdir)"/streamsketch* \
		"$tree$("$PG_CONFIG" --sharedir)"/extension/streamsketch*
	make -C "$src" -s PG_CONFIG="$PG_CONFIG" >/dev/null
	make -C "$src" -s install PG_CONFIG="$PG_CONFIG" DESTDIR="$tree" >/dev/null
	chmod -R a+rX "$tree"
	echo "installed $(git -C "$src" rev-parse --short HEAD) into $tree"
}
install_tree "$BEFORE_SRC" /tmp/pgtree-before
install_tree "$REPO" /tmp/pgtree-after

/usr/bin/python3 "$REPO/test/bench/changelog_bench.py"
/usr/bin/python3 "$REPO/test/bench/changelog_bench_report.py"
