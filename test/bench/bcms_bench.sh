#!/usr/bin/env bash
# BCMS benchmark: the evaluation of the buffered count-min sketch paper
# (update/estimate throughput at RAM:sketch 1:2..1:16 with RAM enforced by a
# memory cgroup) against plain CMS, an upsert table and a heap + btree.
# Writes docs/bench-bcms.md, docs/bench-bcms.png and
# test/bench/bcms_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/bcms_bench.sh
# Parameters: environment variables, see CONFIG in bcms_bench.py
# (e.g. RATIOS=2,4 SB_MB=32 U_BCMS=200000 ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench}
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare bcms_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/bcms_bench.py"
