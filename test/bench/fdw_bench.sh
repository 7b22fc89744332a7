#!/usr/bin/env bash
# Partitions on other servers: a stream INSERTed through a hash-partitioned
# parent whose partitions are postgres_fdw foreign tables on 1, 2 and 4
# shard clusters (on this machine), against one local table and a parent
# with local partitions (rows/s), and key lookups through the parent
# (latency p50/p99).  Writes docs/bench-scale-out.md,
# docs/bench-scale-out.png and test/bench/fdw_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/fdw_bench.sh
# Parameters: environment variables, see CONFIG in fdw_bench.py
# (e.g. ROWS=200000 ROUNDS=1 QUERIES=600 for a quick try).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-fdw}
# a previous run that was killed: stop its shard servers (bench_prepare
# stops the coordinator, $WORK/data, and removes $WORK)
for d in "$WORK"/shard*; do
	if [ -f "$d/postmaster.pid" ]; then
		su postgres -s /bin/sh -c "$(pg_config --bindir)/pg_ctl -D $d -m immediate stop" >/dev/null 2>&1 || true
	fi
done
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare fdw_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/fdw_bench.py"
