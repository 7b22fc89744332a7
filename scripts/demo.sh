#!/usr/bin/env bash
# scripts/demo.sh -- set up a fresh Debian 12 machine (as root), start a
# throwaway cluster and run scripts/demo.sql: a few million Zipf-distributed
# events streamed into a `bcms` table, estimates printed next to exact counts,
# then into a `lert` table, heavy hitters reported next to the exact answer,
# then as page views into a `cbt` table, next to GROUP BY over the raw rows,
# and into a `bfile` sample, its mean and quantiles next to the exact ones.
#
# Usage: bash scripts/demo.sh [psql -v options, e.g. -v n=1000000 -v eps=0.0001]
# At exit (also on failure or interrupt) the cluster is stopped and its
# directory removed, unless STREAMSKETCH_KEEP=1.
# Environment: STREAMSKETCH_SKIP_SETUP=1 skips the set-up,
#   STREAMSKETCH_DEMO_DIR (default /tmp/streamsketch-demo),
#   STREAMSKETCH_DEMO_PORT (default 5545), STREAMSKETCH_KEEP=1 (or, as
#   before, STREAMSKETCH_DEMO_KEEP=1) leaves the cluster running (connect
#   with the psql command printed at the end).
set -euo pipefail

SS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/setup.sh
source "$SS_ROOT/scripts/setup.sh"
# shellcheck source=scripts/cluster.sh
source "$SS_ROOT/scripts/cluster.sh"

if [ "${STREAMSKETCH_SKIP_SETUP:-}" != 1 ]; then
	ss_setup
fi

DEMO="${STREAMSKETCH_DEMO_DIR:-/tmp/streamsketch-demo}"
PORT="${STREAMSKETCH_DEMO_PORT:-5545}"
KEEP="${STREAMSKETCH_KEEP:-${STREAMSKETCH_DEMO_KEEP:-}}"

if [ "$KEEP" != 1 ]; then
	trap 'ss_cluster_stop "$DEMO"; rm -rf "$DEMO"' EXIT
	trap 'exit 130' INT TERM
fi
ss_log "Starting a throwaway cluster in $DEMO (port $PORT)"
ss_cluster_start "$DEMO" "$PORT" "shared_buffers = 256MB" \
	"max_wal_size = 2GB" "checkpoint_timeout = 30min" "work_mem = 64MB"

ss_log "Running scripts/demo.sql"
# the file is read by this shell: the postgres user may not see the tree
ss_as_pg PGHOST="$PGHOST" PGPORT="$PGPORT" PGDATABASE=postgres \
	psql -X -v ON_ERROR_STOP=1 "$@" -f - <"$SS_ROOT/scripts/demo.sql"

if [ "$KEEP" = 1 ]; then
	echo
	echo "The cluster is still running: psql -h $DEMO -p $PORT -U $(ss_pg_user) postgres"
	echo "Stop it with: $SS_PG_BINDIR/pg_ctl -D $DEMO/data stop (as $(ss_pg_user))"
fi
