#!/usr/bin/env bash
# LERT notification delay benchmark: the delay from the commit of the
# observation that makes a key reach T to the arrival of the lert's
# notification at a client that LISTENs and never queries (background
# consolidation at its default settings), at 10 and 1,000 commits per
# second, and with background consolidation off for contrast.  Writes
# docs/bench-notify.md, docs/bench-notify.png and
# test/bench/notify_bench_results.json.
#
# Usage (as root, from anywhere):   bash test/bench/notify_bench.sh
# Parameters: environment variables, see CONFIG in notify_bench.py
# (e.g. CONFIGS=r10,r1000 DURATION_R10=60 DURATION_R1000=30 SYNC_R1000=off ...).
# Needs libpq's headers (libpq-dev) for test/bench/notify_delay.c.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export WORK=${WORK:-/tmp/ssbench-notify}
[ -f "$(pg_config --includedir)/libpq-fe.h" ] || { echo "libpq-fe.h not found: install libpq-dev" >&2; exit 1; }
# shellcheck source=test/bench/benchlib.sh
. test/bench/benchlib.sh
bench_prepare notify_bench.sh

exec /usr/bin/python3 "$REPO/test/bench/notify_bench.py"
