#!/usr/bin/env bash
# bfile benchmark: the B-FILE paper's evaluation (section 7) inside
# PostgreSQL, with RAM enforced by a memory cgroup: the cost per stream
# item of keeping a sample far larger than RAM, against a heap-table
# reservoir and the whole stream in a heap with TABLESAMPLE; subsample and
# window queries against scans.  Writes docs/bench-bfile.md,
# docs/bench-bfile.png and test/bench/bfile_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/bfile_bench.sh
# Parameters: environment variables, see CONFIG in bfile_bench.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-bfile}
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare bfile_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/bfile_bench.py"
