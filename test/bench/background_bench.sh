#!/usr/bin/env bash
# Background consolidation benchmark: each structure's foreground insert
# rate with streamsketch's background workers on (the default) against off
# (the writers consolidate their change logs themselves), and the share of
# the consolidation rounds the workers ran.  Writes
# docs/bench-background.md, docs/bench-background.png and
# test/bench/background_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/background_bench.sh
# Parameters: environment variables, see CONFIG in background_bench.py
# (e.g. STRUCTS=bcms,lert ROWS=300000 BATCH=1000 REPEATS=3).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-background}
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare background_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/background_bench.py"
