#!/usr/bin/env bash
# Plain SQL lookup benchmark: a point query (or time range) asked of a cbt,
# a lert and a bfile by a SQL predicate (the planner's lookup path),
# through the structure's function, and of a btree-indexed heap table
# holding the same answer: latency p50/p99, page touches per query, and a
# join with a 100-row outer table.  Writes docs/bench-lookup.md,
# docs/bench-lookup.png and test/bench/lookup_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/lookup_bench.sh
# Parameters: environment variables, see CONFIG in lookup_bench.py
# (e.g. STRUCTS=cbt KEYS=500000 ROWS=2000000 QUERIES=20000).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-lookup}
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare lookup_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/lookup_bench.py"
