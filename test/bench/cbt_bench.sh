#!/usr/bin/env bash
# cbt benchmark: the compressed buffer tree paper's wordcount evaluation
# (sections 5.2, 5.3) inside PostgreSQL, with RAM enforced by a memory
# cgroup: ingestion, size and GROUP BY answers of a cbt against an upsert
# table and the raw rows in a heap.  Writes docs/bench-cbt.md,
# docs/bench-cbt.png and test/bench/cbt_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/cbt_bench.sh
# Parameters: environment variables, see CONFIG in cbt_bench.py
# (e.g. N=2000000 DATASETS=u1e5:uniform:100000:12 ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-cbt}
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare cbt_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/cbt_bench.py"
