#!/usr/bin/env bash
# scripts/test.sh -- set up a fresh Debian 12 machine (as root) and run every
# test of streamsketch:
#
#   regress    pg_regress          sql/*.sql, expected/*.out
#              (`make installcheck` against a cluster with default settings,
#              as packagers run it: the twophase test takes its
#              twophase_1.out variant there, prepared transactions being off)
#   isolation  pg_isolation_regress test/specs/*.spec, test/expected/*.out
#   tap        prove (PostgreSQL::Test::Cluster) test/t/*.pl, several files
#              at once (each makes its own clusters), the longest first
#   unit       C unit tests of the quotient filter core, test/unit, and
#              scripts/check_docs.sh (links, no issue numbers, every SQL
#              function documented)
#   assert     regress, isolation and TAP 024 again against an assert-enabled
#              PostgreSQL 15 built from Debian's source (scripts/assert-pg.sh),
#              on a cluster that allows prepared transactions: the twophase
#              test must run its two-phase commits there (twophase.out)
#
# The suites run side by side in three lanes (tap, at a lower CPU
# priority | regress, isolation, assert | unit); each suite's output is
# printed in one piece when it ends, and the time each suite took (side by
# side with the others) is printed at the end.  On the 2-core machine,
# alone on it, a run takes about 10 minutes once everything is built,
# and about 14 on a machine where the Debian packages are installed but
# nothing is built yet (plus apt's time on a fresh machine): the
# assert-enabled server's one-time build takes about 5 minutes alone, 10
# beside the other suites, and is kept for later runs (see
# STREAMSKETCH_ASSERT_PG).
#
# The final line, `summary: N passed, M failed` (CI reads it), counts test
# files of every kind alike: pg_regress tests, isolation specs, TAP files
# and unit test programs (a suite that fails without reporting its tests
# counts as one failure).  The line before it gives the counts per kind and
# prove's number of TAP assertions.
#
# Usage: bash scripts/test.sh [unit] [regress] [isolation] [tap] [assert]
#        (default: all)
#
# The source tree is copied to $STREAMSKETCH_TEST_DIR (default
# /tmp/streamsketch-test) and the tests run there as the `postgres` OS user
# (initdb refuses root).  pg_regress and the isolation tests run against a
# throwaway cluster created for this run; the TAP tests create their own
# clusters.  On failure the diffs and logs are printed.  At exit, whether
# the tests passed or not (or the run was interrupted), every cluster under
# $STREAMSKETCH_TEST_DIR is stopped and the directory removed, unless
# STREAMSKETCH_KEEP=1.  Only the assert-enabled PostgreSQL (its source and
# build in /var/tmp) is kept, as the cache of later runs.  Exits non-zero
# if any test failed.  Environment:
#   STREAMSKETCH_SKIP_SETUP=1   do not install packages / build / install
#   STREAMSKETCH_TEST_DIR=DIR   scratch directory (default
#                               /tmp/streamsketch-test), removed at exit
#   STREAMSKETCH_KEEP=1         keep it (outputs, clusters' data and logs)
#   STREAMSKETCH_TEST_PORT      port of the throwaway cluster (default 5544;
#                               the assert suite's is the next one)
#   STREAMSKETCH_PG_TREE=DIR    test a private installation in DIR instead of
#                               the system's (scripts/setup.sh)
#   STREAMSKETCH_TAP_TESTS      only these TAP files (e.g. 'test/t/013_*.pl')
#   STREAMSKETCH_TAP_JOBS       TAP files run at once (default: the number
#                               of CPUs, at least 2)
#   STREAMSKETCH_TEST_SCALE     the TAP tests' long stream and fuzz volumes:
#                               unset or `ci` (default), smaller volumes
#                               that still reach every code path; `full`,
#                               the full volumes: 019_lert_streams, 10^6
#                               observations per stream (ci: half, with
#                               half the keys and level 0);
#                               013_transactional, long consolidations of
#                               4 to 10 million rows (ci: half);
#                               014_damaged_pages, 80 trials per access
#                               method and region (ci: 24); the unit test
#                               lert_test, 10^6 observations per stream
#                               (ci: half, with half the level 0).  Each
#                               TAP file's header says what its ci volume
#                               still reaches.
#   STREAMSKETCH_ASSERT_PG=DIR  where the assert-enabled server is built, or
#                               found from an earlier run (default
#                               /var/tmp/streamsketch-pg-assert; its source
#                               is unpacked and built in DIR.src); each run
#                               installs the extension into a copy of it
#                               under STREAMSKETCH_TEST_DIR, so runs of
#                               several trees at once do not mix
set -uo pipefail

SS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/setup.sh
source "$SS_ROOT/scripts/setup.sh"
# shellcheck source=scripts/cluster.sh
source "$SS_ROOT/scripts/cluster.sh"
# shellcheck source=scripts/assert-pg.sh
source "$SS_ROOT/scripts/assert-pg.sh"
set +e # (setup.sh sets -e) failures are counted, not fatal

ALL_SUITES=(unit regress isolation tap assert)
# The lanes that run side by side, each running its suites in turn.  The
# TAP lane runs at a lower CPU priority (nice 10): pg_regress and the
# isolation specs then run about as fast as alone, which some of their
# tests need (a few expect a change log that autovacuum has not yet
# consolidated, so a slow run is more exposed to it), and the TAP files
# take every cycle they leave.
LANES=("tap" "regress isolation assert" "unit")
TAP_NICE=10
# TAP files started first (the longest, longest first): prove -j starts
# the files in the order given, so the last to end is not a long one
# started late.  Files not listed follow in name order.
TAP_FIRST=(013 015 020 014 019 021 022 017 009 018 012)

SUITES=("$@")
[ "${#SUITES[@]}" -gt 0 ] || SUITES=("${ALL_SUITES[@]}")
for s in "${SUITES[@]}"; do
	case "$s" in
	unit | regress | isolation | tap | assert) ;;
	*)
		echo "usage: $0 [unit] [regress] [isolation] [tap] [assert]" >&2
		exit 2
		;;
	esac
done
case "${STREAMSKETCH_TEST_SCALE:-ci}" in
ci | full) ;;
*)
	echo "STREAMSKETCH_TEST_SCALE must be ci or full" >&2
	exit 2
	;;
esac

T_START=$SECONDS
if [ "${STREAMSKETCH_SKIP_SETUP:-}" != 1 ]; then
	ss_setup || {
		echo "set-up failed" >&2
		exit 1
	}
fi
[ -z "${STREAMSKETCH_PG_TREE:-}" ] || ss_private_tree "$STREAMSKETCH_PG_TREE"
T_SETUP=$((SECONDS - T_START))

WORK="${STREAMSKETCH_TEST_DIR:-/tmp/streamsketch-test}"
TREE="$WORK/tree"
CLUSTER="$WORK/pg"
ASSERT_CLUSTER="$WORK/pg-assert"
STATUS="$WORK/status"
PORT="${STREAMSKETCH_TEST_PORT:-5544}"
KEEP="${STREAMSKETCH_KEEP:-}"

# stop_clusters: stop every cluster under $WORK (ours, the assert
# suite's and any the TAP tests left running), immediately.
stop_clusters() {
	local pid data
	[ -d "$WORK" ] || return 0
	while IFS= read -r pid; do
		data=$(dirname "$pid")
		ss_as_pg pg_ctl -D "$data" stop -m immediate -w >/dev/null 2>&1 || true
	done < <(find "$WORK" -name postmaster.pid 2>/dev/null)
}

# A leftover cluster of an earlier run would keep files open: stop it first.
stop_clusters
rm -rf "$WORK"
mkdir -p "$TREE" "$STATUS"
ss_log "Copying the tree to $TREE"
tar -C "$SS_ROOT" --exclude=./.git --exclude=./tmp_check --exclude=./results \
	--exclude=./test/output_iso --exclude=./regression.diffs \
	--exclude=./regression.out -cf - . | tar -C "$TREE" -xf -
if [ "$(id -u)" -eq 0 ]; then chown -R postgres:postgres "$WORK"; fi

# kill_tree PID: end a lane and everything it started (its descendants,
# found through their parents; clusters are stopped by stop_clusters).
kill_tree() {
	local pid="$1" child
	for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
		kill_tree "$child"
	done
	kill -TERM "$pid" 2>/dev/null || true
}

LANE_PIDS=()
CLEANED=
cleanup() {
	[ -z "$CLEANED" ] || return 0
	CLEANED=1
	local pid
	for pid in "${LANE_PIDS[@]}"; do
		kill -0 "$pid" 2>/dev/null && kill_tree "$pid"
	done
	stop_clusters
	if [ "$KEEP" = 1 ]; then
		echo "(STREAMSKETCH_KEEP=1: outputs and clusters' data kept in $WORK)"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- what a suite reports, in $STATUS/SUITE (read back by the main shell) ---
# count KIND PASSED FAILED: test files of a kind that passed and failed
count() {
	printf 'count\t%s\t%s\t%s\n' "$1" "$2" "$3" >>"$STATUS/$SUITE"
}
suite_failed() {
	printf 'failed\t%s\n' "$1" >>"$STATUS/$SUITE"
}

# print_file FILE [MAXLINES]: print (the end of) a file under a header.
print_file() {
	local f="$1" max="${2:-400}" n
	[ -f "$f" ] || return 0
	n=$(wc -l <"$f")
	echo
	echo "----- $f ($n lines$([ "$n" -gt "$max" ] && echo ", last $max shown")) -----"
	tail -n "$max" "$f"
	echo "----- end of $f -----"
}

# count_pg_regress KIND OUTFILE: add pg_regress's "All N tests passed." /
# "M of N tests failed." to the totals; 1 on no summary.
count_pg_regress() {
	local kind="$1" out="$2" line n m
	line=$(grep -E '^ *(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)' "$out" | tail -n 1)
	if [[ "$line" =~ All\ ([0-9]+)\ tests\ passed ]]; then
		count "$kind" "${BASH_REMATCH[1]}" 0
	elif [[ "$line" =~ ([0-9]+)\ of\ ([0-9]+)\ tests\ failed ]]; then
		m=${BASH_REMATCH[1]}
		n=${BASH_REMATCH[2]}
		count "$kind" $((n - m)) "$m"
	else
		return 1
	fi
}

# run_make NAME TIMEOUT make-args...: run `make installcheck` in the copy as
# the postgres user, output teed to $WORK/NAME.out; returns make's status.
run_make() {
	local name="$1" limit="$2"
	shift 2
	ss_as_pg PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER="${PGUSER:-}" \
		PGDATABASE="${PGDATABASE:-}" \
		STREAMSKETCH_TEST_SCALE="${STREAMSKETCH_TEST_SCALE:-}" \
		TMPDIR="${TMPDIR:-/tmp}" \
		timeout -k 60 "$limit" make -C "$TREE" --no-print-directory \
		PG_CONFIG="$PG_CONFIG" ${STREAMSKETCH_PG_TREE:+bindir="$SS_PG_BINDIR"} \
		"$@" 2>&1 | tee "$WORK/$name.out"
	return "${PIPESTATUS[0]}"
}

server_log_problems() {
	local log="$CLUSTER/postgresql.log"
	if grep -qE 'terminated by signal|PANIC|TRAP:|was terminated' "$log" 2>/dev/null; then
		echo "!!! the server crashed during the $1 tests:"
		grep -nE -B2 -A8 'terminated by signal|PANIC|TRAP:|was terminated' "$log" | tail -n 80
	fi
}

CLUSTER_UP=
need_cluster() {
	[ -n "$CLUSTER_UP" ] && return 0
	# Default settings (max_prepared_transactions = 0 among them): what
	# `make installcheck` meets on a packager's or a user's server.  Tests
	# that need another setting SET it themselves; the twophase test's
	# prepared transactions run in the assert suite (run_assert).
	ss_log "Starting a throwaway cluster with default settings in $CLUSTER (port $PORT)"
	ss_cluster_start "$CLUSTER" "$PORT" || return 1
	CLUSTER_UP=1
}

run_regress() {
	local rc
	# the Makefile's REGRESS: sql/*.sql but the built extension script
	if ! find "$TREE/sql" -maxdepth 1 -name '*.sql' ! -name 'streamsketch--*' |
		grep -q .; then
		ss_log "regress: no pg_regress tests (sql/*.sql)"
		return 0
	fi
	need_cluster || {
		count "pg_regress tests" 0 1
		suite_failed regress
		return 0
	}
	ss_log "regress: pg_regress (make installcheck)"
	run_make regress 20m installcheck ISOLATION= TAP_TESTS=
	rc=$?
	count_pg_regress "pg_regress tests" "$WORK/regress.out" ||
		count "pg_regress tests" 0 1
	if [ "$rc" -ne 0 ]; then
		suite_failed regress
		[ "$rc" -eq 124 ] && echo "!!! regress: timed out"
		print_file "$TREE/regression.diffs" 600
		server_log_problems regress
		print_file "$CLUSTER/postgresql.log" 60
	fi
}

run_isolation() {
	local rc
	if ! compgen -G "$TREE/test/specs/*.spec" >/dev/null; then
		ss_log "isolation: no isolation tests (test/specs/*.spec)"
		return 0
	fi
	need_cluster || {
		count "isolation specs" 0 1
		suite_failed isolation
		return 0
	}
	ss_log "isolation: pg_isolation_regress (make installcheck)"
	run_make isolation 10m installcheck REGRESS= TAP_TESTS=
	rc=$?
	count_pg_regress "isolation specs" "$WORK/isolation.out" ||
		count "isolation specs" 0 1
	if [ "$rc" -ne 0 ]; then
		suite_failed isolation
		[ "$rc" -eq 124 ] && echo "!!! isolation: timed out"
		print_file "$TREE/test/output_iso/regression.diffs" 600
		server_log_problems isolation
		print_file "$CLUSTER/postgresql.log" 60
	fi
}

# The TAP files to run: STREAMSKETCH_TAP_TESTS, or every test/t/*.pl with
# those of TAP_FIRST first (paths relative to the tree).
tap_files() {
	local p f listed=" "
	if [ -n "${STREAMSKETCH_TAP_TESTS:-}" ]; then
		(cd "$TREE" && for f in $STREAMSKETCH_TAP_TESTS; do echo "$f"; done)
		return
	fi
	for p in "${TAP_FIRST[@]}"; do
		for f in "$TREE"/test/t/"$p"_*.pl; do
			[ -f "$f" ] || continue
			echo "test/t/$(basename "$f")"
			listed+="$(basename "$f") "
		done
	done
	for f in "$TREE"/test/t/*.pl; do
		[[ "$listed" == *" $(basename "$f") "* ]] || echo "test/t/$(basename "$f")"
	done
}

run_tap() {
	local rc out files failed f base log jobs list
	if ! compgen -G "$TREE/test/t/*.pl" >/dev/null; then
		ss_log "tap: no TAP tests (test/t/*.pl)"
		return 0
	fi
	jobs=${STREAMSKETCH_TAP_JOBS:-$(nproc)}
	[ "$jobs" -ge 2 ] || jobs=2
	list=$(tap_files | tr '\n' ' ')
	ss_log "tap: prove -j$jobs (make installcheck, PostgreSQL::Test::Cluster), scale ${STREAMSKETCH_TEST_SCALE:-ci}"
	# Debian's PGXS may be configured without TAP: force it on.  TMPDIR:
	# the tests' socket directories (tempdir_short) go under $WORK too.
	mkdir -p "$WORK/tmp"
	[ "$(id -u)" -ne 0 ] || chown postgres:postgres "$WORK/tmp"
	TMPDIR="$WORK/tmp" run_make tap 30m installcheck REGRESS= ISOLATION= \
		enable_tap_tests=yes PROVE=/usr/bin/prove \
		PROVE_FLAGS="--timer -j$jobs" PROVE_TESTS="$list"
	rc=$?
	out="$WORK/tap.out"
	files=$(grep -oE '^Files=[0-9]+' "$out" | tail -n 1 | cut -d= -f2)
	# failed test files, from prove's summary table
	failed=$(grep -E '^test/t/[^ ]+\.pl +\(Wstat' "$out" | awk '{print $1}' | sort -u)
	printf 'assertions\t%s\n' "$(grep -oE '^Files=[0-9]+, Tests=[0-9]+' "$out" |
		tail -n 1 | sed 's/.*Tests=//')" >>"$STATUS/$SUITE"
	if [ -n "$files" ]; then
		local nf
		nf=$(printf '%s\n' "$failed" | grep -c . || true)
		count "TAP files" $((files - nf)) "$nf"
	else
		count "TAP files" 0 1
	fi
	if [ "$rc" -ne 0 ]; then
		suite_failed tap
		[ "$rc" -eq 124 ] && echo "!!! tap: timed out"
		# no summary table (timeout, prove died): show every test's log
		[ -n "$failed" ] || failed=$list
		for f in $failed; do
			base=$(basename "$f" .pl)
			print_file "$TREE/tmp_check/log/regress_log_$base" 250
			for log in "$TREE/tmp_check/log/${base}"_*.log; do
				print_file "$log" 80
			done
		done
	fi
}

# unit_args PROGRAM: its arguments at the scale in force.  lert_test's
# streams (10^6 observations, level 0 of 4,096 keys by default) run at
# half the length and half the level 0 at the ci scale, where they reach
# the same lines and branches (gcov: all but the argument parsing).
unit_args() {
	[ "${STREAMSKETCH_TEST_SCALE:-ci}" = ci ] || return 0
	case "$1" in
	lert_test) echo 500000 2048 ;;
	esac
}

# C unit tests of the server-independent cores (test/unit): no cluster
# needed.  Each test program is run and counted on its own.
run_unit() {
	local rc t tests failed=0
	ss_log "unit: make -C test/unit"
	tests=$(make -s -C "$TREE/test/unit" --no-print-directory print-tests)
	ss_as_pg timeout -k 60 10m make -C "$TREE/test/unit" --no-print-directory tests 2>&1 |
		tee "$WORK/unit.out"
	rc=${PIPESTATUS[0]}
	for t in $tests; do
		# (pipefail: the test's status, not tee's)
		if [ "$rc" -eq 0 ] &&
			ss_as_pg sh -c "cd '$TREE/test/unit' && timeout -k 60 10m ./$t $(unit_args "$t")" 2>&1 |
			tee -a "$WORK/unit.out"; then
			count "unit test programs" 1 0
		else
			count "unit test programs" 0 1
			failed=1
		fi
	done
	[ -n "$tests" ] || count "unit test programs" 0 1
	# the documentation: links resolve, no issue numbers, every SQL
	# function documented (scripts/check_docs.sh)
	if bash "$TREE/scripts/check_docs.sh" 2>&1 | tee -a "$WORK/unit.out"; then
		count "unit test programs" 1 0
	else
		count "unit test programs" 0 1
		failed=1
	fi
	if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ] || [ -z "$tests" ]; then
		suite_failed unit
	fi
}

# The regress and isolation suites against an assert-enabled server, in a
# copy of the tree built against it, on a cluster of its own.  Assertion
# failures crash the server (TRAP:); pins the extension leaks show up as
# "buffer refcount leak" warnings, which assert-enabled servers print at
# the end of every statement.
run_assert() {
	local dir="${STREAMSKETCH_ASSERT_PG:-/var/tmp/streamsketch-pg-assert}"
	local atree="$WORK/tree-assert" rc name kind
	if ! ss_assert_pg "$dir"; then
		echo "!!! assert: could not build an assert-enabled PostgreSQL"
		count "assert-build suites" 0 1
		suite_failed assert
		return 0
	fi
	# The extension goes into a copy of that installation, private to this
	# run (it is relocatable, 80 MB): runs of other trees at the same time
	# share the build in $dir, and installing there would replace each
	# other's extension under their servers.
	local inst="$WORK/pg-assert-install"
	cp -a "$dir" "$inst" || {
		count "assert-build suites" 0 1
		suite_failed assert
		return 0
	}
	SS_ASSERT_PG_CONFIG="$inst/bin/pg_config"
	local SS_PG_BINDIR="$inst/bin"
	mkdir -p "$atree"
	tar -C "$TREE" --exclude=./tmp_check --exclude=./results \
		--exclude=./test/output_iso --exclude=./regression.diffs \
		--exclude=./regression.out -cf - . | tar -C "$atree" -xf -
	ss_log "assert: building streamsketch against $("$SS_ASSERT_PG_CONFIG" --version) (assertions on)"
	{ make -C "$atree" -s clean PG_CONFIG="$SS_ASSERT_PG_CONFIG" &&
		make -C "$atree" -s -j"$(nproc)" PG_CONFIG="$SS_ASSERT_PG_CONFIG" &&
		make -C "$atree" -s install PG_CONFIG="$SS_ASSERT_PG_CONFIG" &&
		chmod -R a+rX "$inst"; } \
		>"$WORK/assert-build.out" 2>&1 || {
		print_file "$WORK/assert-build.out" 100
		count "assert-build suites" 0 1
		suite_failed assert
		return 0
	}
	if [ "$(id -u)" -eq 0 ]; then chown -R postgres:postgres "$atree"; fi
	ss_cluster_start "$ASSERT_CLUSTER" $((PORT + 1)) \
		"fsync = off" "full_page_writes = off" "synchronous_commit = off" \
		"shared_buffers = 128MB" "max_connections = 40" \
		"max_wal_size = 1GB" "checkpoint_timeout = 30min" \
		"max_prepared_transactions = 5" || {
		count "assert-build suites" 0 1
		suite_failed assert
		return 0
	}
	for name in regress isolation; do
		kind="assert-build $([ $name = regress ] && echo "pg_regress tests" || echo "isolation specs")"
		ss_log "assert: $name against the assert-enabled server"
		if [ $name = regress ]; then
			set -- installcheck ISOLATION= TAP_TESTS=
		else
			set -- installcheck REGRESS= TAP_TESTS=
		fi
		ss_as_pg PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER="$PGUSER" \
			PGDATABASE="$PGDATABASE" \
			timeout -k 60 30m make -C "$atree" --no-print-directory \
			PG_CONFIG="$SS_ASSERT_PG_CONFIG" "$@" 2>&1 |
			tee "$WORK/assert-$name.out"
		rc=${PIPESTATUS[0]}
		count_pg_regress "$kind" "$WORK/assert-$name.out" || count "$kind" 0 1
		if [ "$rc" -ne 0 ]; then
			suite_failed "assert-$name"
			print_file "$atree/$([ $name = regress ] || echo test/output_iso/)regression.diffs" 400
		fi
	done
	# TRUNCATE of damaged structures: the read of a damaged metapage fails
	# with its buffer pinned and locked, which only an assert-enabled
	# server checks is cleaned up (its own clusters; PostgreSQL's TAP
	# modules come from the Debian package)
	ss_log "assert: TAP 024 (TRUNCATE of damaged structures) against the assert-enabled server"
	ss_as_pg PERL5LIB="$(pg_config --pgxs | sed 's|/makefiles/pgxs.mk$||')/test/perl" \
		timeout -k 60 15m make -C "$atree" --no-print-directory \
		PG_CONFIG="$SS_ASSERT_PG_CONFIG" installcheck REGRESS= ISOLATION= \
		enable_tap_tests=yes PROVE=/usr/bin/prove \
		PROVE_TESTS=test/t/024_truncate_damaged.pl >"$WORK/assert-tap.out" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ] && grep -q '^Result: PASS' "$WORK/assert-tap.out" &&
		! grep -qE 'TRAP:|refcount leak|terminated by signal' \
			"$atree"/tmp_check/log/024_*.log; then
		count "assert-build TAP files" 1 0
	else
		print_file "$WORK/assert-tap.out" 100
		grep -hnE -B2 -A8 'TRAP:|refcount leak|terminated by signal' \
			"$atree"/tmp_check/log/024_*.log | tail -n 40
		count "assert-build TAP files" 0 1
		suite_failed assert-tap
	fi
	# pg_regress accepts either of twophase's outputs: this cluster allows
	# prepared transactions, so passing with the output of a server that
	# refuses them (compared ignoring white space, as pg_regress does) means
	# no two-phase commit was tested.
	if [ -f "$atree/results/twophase.out" ] &&
		diff -w -q "$atree/expected/twophase_1.out" "$atree/results/twophase.out" >/dev/null; then
		echo "!!! assert: the twophase test ran without prepared transactions"
		count "assert-build suites" 0 1
		suite_failed assert-twophase
	fi
	if grep -qE 'TRAP:|refcount leak|terminated by signal' "$ASSERT_CLUSTER/postgresql.log"; then
		echo "!!! assert: the server log shows a failed assertion, a crash or a leaked pin:"
		grep -nE -B2 -A8 'TRAP:|refcount leak|terminated by signal' \
			"$ASSERT_CLUSTER/postgresql.log" | tail -n 80
		count "assert-build suites" 0 1
		suite_failed assert
	fi
	ss_cluster_stop "$ASSERT_CLUSTER"
}

# run_suite SUITE: run it, its output to $WORK/SUITE.log, its time and a
# done mark to $STATUS/SUITE (the main shell prints the log once done).
run_suite() {
	local t0=$SECONDS
	SUITE="$1"
	: >"$STATUS/$SUITE"
	touch "$STATUS/$SUITE.started"
	"run_$SUITE" >"$WORK/$SUITE.log" 2>&1
	printf 'time\t%s\n' $((SECONDS - t0)) >>"$STATUS/$SUITE"
	touch "$STATUS/$SUITE.done"
}

# run_lane SUITE...: the selected ones of these suites, in turn; the
# cluster the lane started (regress, isolation) is stopped at its end.
run_lane() {
	local s
	if [ "$*" = tap ]; then
		renice -n "$TAP_NICE" -p "$BASHPID" >/dev/null
	fi
	for s in "$@"; do
		[[ " ${SUITES[*]} " == *" $s "* ]] && run_suite "$s"
	done
	[ -z "$CLUSTER_UP" ] || ss_cluster_stop "$CLUSTER"
}

# print_done: say which suites started, and print the log of each suite
# that ended, since the last call
PRINTED=" "
STARTED=" "
print_done() {
	local s
	for s in "${ALL_SUITES[@]}"; do
		[ -f "$STATUS/$s.started" ] || continue
		[[ "$STARTED" == *" $s "* ]] && continue
		STARTED+="$s "
		echo "==> $s: started after $((SECONDS - T_TESTS)) s"
	done
	for s in "${ALL_SUITES[@]}"; do
		[ -f "$STATUS/$s.done" ] || continue
		[[ "$PRINTED" == *" $s "* ]] && continue
		PRINTED+="$s "
		echo
		echo "===================== $s: ended after $(sed -n 's/^time\t//p' "$STATUS/$s") s ====================="
		cat "$WORK/$s.log"
	done
}

ss_log "Running ${SUITES[*]} side by side (lanes: $(printf '[%s] ' "${LANES[@]}"))"
T_TESTS=$SECONDS
for lane in "${LANES[@]}"; do
	# shellcheck disable=SC2086
	set -- $lane
	want=
	for s in "$@"; do [[ " ${SUITES[*]} " == *" $s "* ]] && want=1; done
	[ -n "$want" ] || continue
	run_lane "$@" &
	LANE_PIDS+=($!)
done
while :; do
	running=
	for pid in "${LANE_PIDS[@]}"; do
		kill -0 "$pid" 2>/dev/null && running=1
	done
	print_done
	[ -n "$running" ] || break
	sleep 2
done
wait
print_done
T_TESTS=$((SECONDS - T_TESTS))

# --- the totals, from what each suite reported ---
NPASS=0
NFAIL=0
FAILED_SUITES=()
declare -A KIND_COUNTS=()
TAP_ASSERTIONS=
TIMES=
for s in "${SUITES[@]}"; do
	if [ ! -f "$STATUS/$s.done" ]; then
		# the lane died before the suite ended
		FAILED_SUITES+=("$s")
		NFAIL=$((NFAIL + 1))
		continue
	fi
	while IFS=$'\t' read -r what a b c; do
		case "$what" in
		count)
			NPASS=$((NPASS + b))
			NFAIL=$((NFAIL + c))
			old=${KIND_COUNTS[$a]:-0 0}
			KIND_COUNTS[$a]="$((${old% *} + b)) $((${old#* } + c))"
			;;
		failed) FAILED_SUITES+=("$a") ;;
		assertions) TAP_ASSERTIONS=$a ;;
		time) TIMES+="${TIMES:+, }$s $a s" ;;
		esac
	done <"$STATUS/$s"
done

# Clean up now, so that the summary stays the last line.
cleanup

echo
echo "====================================================================="
echo "streamsketch tests: ${#SUITES[@]} suite(s) in $((SECONDS - T_START)) s" \
	"(set-up $T_SETUP s, tests $T_TESTS s)"
echo "time per suite (side by side): $TIMES"
if [ "${#FAILED_SUITES[@]}" -gt 0 ]; then
	echo "FAILED suites: ${FAILED_SUITES[*]}$([ "$KEEP" = 1 ] && echo "  (outputs in $WORK)")"
fi
echo "====================================================================="
kinds=
for k in "pg_regress tests" "isolation specs" "TAP files" "unit test programs" \
	"assert-build pg_regress tests" "assert-build isolation specs" \
	"assert-build TAP files" "assert-build suites"; do
	[ -n "${KIND_COUNTS[$k]:-}" ] || continue
	kinds+="${kinds:+, }$k ${KIND_COUNTS[$k]% *} passed/${KIND_COUNTS[$k]#* } failed"
done
echo "counted: ${kinds:-nothing}"
[ -z "$TAP_ASSERTIONS" ] || echo "TAP assertions (prove): $TAP_ASSERTIONS"
echo "summary: $NPASS passed, $NFAIL failed"
[ "$NFAIL" -eq 0 ] && [ "${#FAILED_SUITES[@]}" -eq 0 ]
