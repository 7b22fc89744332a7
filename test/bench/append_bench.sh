#!/usr/bin/env bash
# Commit throughput of concurrent writers into ONE structure: BEFORE
# (default: where this branch left main, whose append held the append lock
# and the tail page's content lock while it read the transaction's spill
# file) against
# AFTER (this work tree: a batch's pages are built before the log is
# locked, src/storage/ss_logappend.c).  Each version is built and
# installed into its own private copy of the PostgreSQL binaries under
# $WORK (default /tmp/ssbench-append) and runs its own cluster (ports 5693,
# 5694); the system installation is not touched.
#
# Every point is pgbench -c C -j C -T SECS with one script, one INSERT of
# ROWS rows (random int8 keys) per transaction, into a table created afresh
# for the point (a bcms, epsilon 0.0001, or a cbt, count(*) per key), with
# streamsketch.pending_memory = 64kB, so a 100,000-row transaction spills
# to a temporary file.  The versions alternate (BEFORE first in odd
# repeats, AFTER first in even ones) so that other load on the machine
# falls on both alike.  Prints every measurement, then per point the
# median commits/s of each version and AFTER/BEFORE, as a markdown table
# (also written to $WORK/summary.md).
#
# Usage (as root):   bash test/bench/append_bench.sh
# Parameters (environment): BEFORE=<commit> (git merge-base main HEAD),
# REPEATS (3),
# CLIENTS (1,2,4), ROWS (100,100000), STRUCTS (bcms,cbt), SECS_SMALL (10,
# for ROWS < 10000), SECS_BIG (20), LOG_LIMIT (the
# streamsketch.change_log_limit of the writers: default 1MB, the server's;
# a large value such as 64GB leaves consolidation out of the run and
# measures the appends alone).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
WORK=${WORK:-/tmp/ssbench-append}
BEFORE=${BEFORE:-$(git merge-base main HEAD)}
REPEATS=${REPEATS:-3}
CLIENTS=${CLIENTS:-1,2,4}
ROWS=${ROWS:-100,100000}
STRUCTS=${STRUCTS:-bcms,cbt}
SECS_SMALL=${SECS_SMALL:-10}
SECS_BIG=${SECS_BIG:-20}
LOG_LIMIT=${LOG_LIMIT:-1MB}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
BINDIR=$("$PG_CONFIG" --bindir)

mkdir -p "$WORK"
chown postgres "$WORK"
# BEFORE's source, exported (no worktree is added to the repository)
BEFORE_SRC=$WORK/before-src
rm -rf "$BEFORE_SRC"
mkdir -p "$BEFORE_SRC"
git -C "$REPO" archive "$BEFORE" | tar -x -C "$BEFORE_SRC"

install_tree() {    # SRC TREE LABEL
	local src=$1 tree=$2 label=$3 d
	if [ ! -x "$tree$BINDIR/postgres" ]; then
		for d in "$BINDIR" "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)"; do
			mkdir -p "$tree$(dirname "$d")"
			cp -a "$d" "$tree$d"
		done
	fi
	rm -rf "$tree$("$PG_CONFIG" --pkglibdir)/bitcode" "$tree$("$PG_CONFIG" --pkglibdir)"/streamsketch* \
		"$tree$("$PG_CONFIG" --sharedir)"/extension/streamsketch*
	make -C "$src" -s -j2 PG_CONFIG="$PG_CONFIG" >/dev/null
	make -C "$src" -s install PG_CONFIG="$PG_CONFIG" DESTDIR="$tree" >/dev/null
	chmod -R a+rX "$tree"
	echo "installed $label ($src) into $tree"
}

as_pg() { su postgres -s /bin/bash -c "$*"; }

declare -A PORT=([before]=5693 [after]=5694)
start_cluster() {    # VERSION
	local v=$1 data=$WORK/data-$1 bin=$WORK/tree-$1$BINDIR
	if [ -f "$data/postmaster.pid" ]; then
		as_pg "$bin/pg_ctl -D $data -m immediate stop" >/dev/null 2>&1 || true
	fi
	rm -rf "$data"
	as_pg "$bin/initdb -D $data -A trust -U postgres" >/dev/null
	cat >>"$data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$WORK'
port = ${PORT[$v]}
max_connections = 20
shared_buffers = 256MB
max_wal_size = 8GB
checkpoint_timeout = 30min
autovacuum = off
jit = off
EOF
	as_pg "$bin/pg_ctl -D $data -l $WORK/server-$v.log -w start" >/dev/null
	as_pg "$bin/psql -X -q -h $WORK -p ${PORT[$v]} -c 'CREATE EXTENSION streamsketch' postgres"
}
stop_clusters() {
	local v
	for v in before after; do
		[ -f "$WORK/data-$v/postmaster.pid" ] &&
			as_pg "$WORK/tree-$v$BINDIR/pg_ctl -D $WORK/data-$v -m fast stop" >/dev/null 2>&1 || true
	done
}
trap stop_clusters EXIT

install_tree "$BEFORE_SRC" "$WORK/tree-before" "BEFORE $(git -C "$REPO" rev-parse --short "$BEFORE")"
install_tree "$REPO" "$WORK/tree-after" "AFTER $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" status --porcelain -- src | grep -q . && echo ' (modified)')"
start_cluster before
start_cluster after

create_sql() {    # STRUCT
	case $1 in
	bcms) echo "DROP TABLE IF EXISTS t; SELECT bcms_create('t', 'int8', epsilon => 0.0001); CHECKPOINT;" ;;
	cbt) echo "DROP TABLE IF EXISTS t; SELECT cbt_create('t', 'k int8', 'count(*) AS n'); CHECKPOINT;" ;;
	esac
}

# measure VERSION STRUCT ROWS CLIENTS SECS: prints commits/s
measure() {
	local v=$1 s=$2 n=$3 c=$4 secs=$5 bin=$WORK/tree-$1$BINDIR out
	as_pg "$bin/psql -X -q -h $WORK -p ${PORT[$v]} -c \"$(create_sql "$s")\" postgres" >/dev/null
	printf 'INSERT INTO t SELECT (random() * 1000000)::int8 FROM generate_series(1, %d);\n' "$n" >"$WORK/ins-$n.sql"
	chmod a+r "$WORK/ins-$n.sql"
	out=$(as_pg "PGOPTIONS='-c streamsketch.pending_memory=64kB -c streamsketch.change_log_limit=$LOG_LIMIT' \
		$bin/pgbench -n -h $WORK -p ${PORT[$v]} -c $c -j $c -T $secs -f $WORK/ins-$n.sql postgres" 2>&1)
	echo "$out" | sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p'
}

RESULTS=$WORK/results.tsv
: >"$RESULTS"
for r in $(seq 1 "$REPEATS"); do
	if [ $((r % 2)) = 1 ]; then order="before after"; else order="after before"; fi
	for s in ${STRUCTS//,/ }; do
		for n in ${ROWS//,/ }; do
			secs=$SECS_BIG
			[ "$n" -ge 10000 ] || secs=$SECS_SMALL
			for c in ${CLIENTS//,/ }; do
				for v in $order; do
					tps=$(measure "$v" "$s" "$n" "$c" "$secs")
					printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$s" "$n" "$c" "$v" "$tps" | tee -a "$RESULTS"
				done
			done
		done
	done
done

# medians per point, and the ratio
/usr/bin/python3 - "$RESULTS" "$LOG_LIMIT" "$REPEATS" <<'EOF' | tee "$WORK/summary.md"
import statistics, sys
from collections import defaultdict
vals = defaultdict(list)
for line in open(sys.argv[1]):
    r, s, n, c, v, tps = line.rstrip('\n').split('\t')[:6]
    vals[(s, int(n), int(c), v)].append(float(tps))
print(f"change_log_limit {sys.argv[2]}, {sys.argv[3]} repeats; commits/s, median (min-max)\n")
print("| structure | rows/commit | writers | before | after | after/before |")
print("|---|---:|---:|---:|---:|---:|")
for (s, n, c) in sorted({k[:3] for k in vals}, key=lambda k: (k[0], k[1], k[2])):
    b, a = vals[(s, n, c, 'before')], vals[(s, n, c, 'after')]
    fmt = lambda x: f"{statistics.median(x):.1f} ({min(x):.1f}-{max(x):.1f})"
    print(f"| {s} | {n:,} | {c} | {fmt(b)} | {fmt(a)} | {statistics.median(a) / statistics.median(b):.2f} |")
EOF
