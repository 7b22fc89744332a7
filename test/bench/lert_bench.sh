#!/usr/bin/env bash
# LERT benchmark: the evaluation of the timely heavy-hitter paper inside
# PostgreSQL (timeliness of every variant on a Firehose-like stream,
# throughput and I/O per observation with RAM enforced by a memory cgroup,
# scaling with sessions) against an upsert-and-report table and the in-RAM
# reference.  Writes docs/bench-lert.md, docs/bench-lert.png and
# test/bench/lert_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/lert_bench.sh
# Parameters: environment variables, see CONFIG in lert_bench.py
# (e.g. N=4000000 VARIANTS=csl,irl SESSIONS=1 ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-lert}
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare lert_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/lert_bench.py"
