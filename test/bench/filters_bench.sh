#!/usr/bin/env bash
# Filter benchmark: Table 1 of the quotient/cascade filter paper (Bender et
# al., VLDB 2012) inside PostgreSQL: QF vs Bloom filter in RAM at fp rates
# 1/64, 1/512, 1/4096; cascade filter (fanouts 2, 4, 16) and buffered QF vs
# elevator and buffered Bloom filters on disk at RAM:filter 1:4 and 1:24
# under a memory cgroup; btree and hash indexes as the exact alternative.
# Writes docs/bench-filters.md, docs/bench-filters*.png and
# test/bench/filters_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/filters_bench.sh
# Parameters: environment variables, see CONFIG in filters_bench.py
# (e.g. RATIOS=4 SB_MB=64 FANOUTS=4 ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-filters}
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare filters_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/filters_bench.py"
