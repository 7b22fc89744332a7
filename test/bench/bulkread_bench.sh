#!/usr/bin/env bash
# bulkread_bench.sh -- does a whole-structure scan keep the rest of
# shared_buffers?  A cached OLTP table (heap and primary key, about 50 MB,
# loaded with pg_prewarm) beside a cbt several times shared_buffers (128 MB):
# the table's cached pages are counted (pg_buffercache) before and after
# SELECT count(*) over the cbt, and after cbt_finalize, and the scan is
# timed.  Structures read every page of a scan through a small ring of
# buffers (BAS_BULKREAD), as a heap's sequential scan does; with the
# default strategy the scan evicts the table.
#
# Usage (as root, from the repository root):
#   NGROUPS=6000000 bash test/bench/bulkread_bench.sh
# Prints "oltp pages cached before/after" and the ratio kept.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
WORK=${WORK:-/var/tmp/streamsketch-bulkread}
NGROUPS=${NGROUPS:-6000000}
PORT=${PORT:-5690}
# shellcheck source=test/bench/benchlib.sh
source test/bench/benchlib.sh
bench_prepare bulkread_bench
BIN="$WORK/pg$(pg_config --bindir)"
as_pg() { su postgres -s /bin/sh -c "$*"; }
as_pg "$BIN/initdb -D $WORK/data -A trust >/dev/null"
cat >>"$WORK/data/postgresql.conf" <<EOF
port = $PORT
unix_socket_directories = '$WORK'
shared_buffers = 128MB
autovacuum = off
EOF
as_pg "$BIN/pg_ctl -D $WORK/data -l $WORK/log -w start >/dev/null"
# the cluster and its files go at exit, unless STREAMSKETCH_KEEP=1
cleanup() {
	as_pg "$BIN/pg_ctl -D $WORK/data -m fast stop" >/dev/null 2>&1 || true
	[ "${STREAMSKETCH_KEEP:-}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
# run SQL (stdin) as postgres; prints the unaligned result
psql_() { as_pg "$BIN/psql -h $WORK -p $PORT -d postgres -X -q -At -v ON_ERROR_STOP=1 -f -"; }
psql_ <<'SQL'
CREATE EXTENSION streamsketch;
CREATE EXTENSION pg_buffercache;
CREATE EXTENSION pg_prewarm;
CREATE TABLE oltp (id int PRIMARY KEY, pad text);
INSERT INTO oltp SELECT g, repeat('x', 200) FROM generate_series(1, 200000) g;
VACUUM ANALYZE oltp;
SELECT cbt_create('big', 'k int8', 'count(*) AS n, sum(v::int) AS s', compression => false);
SQL
echo "INSERT INTO big (k, v) SELECT g, g FROM generate_series(1, $NGROUPS) g; SELECT cbt_finalize('big');" | psql_ >/dev/null
cached="SELECT count(*) FROM pg_buffercache b JOIN pg_class c ON b.relfilenode = pg_relation_filenode(c.oid) WHERE c.relname IN ('oltp', 'oltp_pkey');"
as_pg "$BIN/pg_ctl -D $WORK/data -l $WORK/log -w restart >/dev/null"
echo "SELECT pg_prewarm('oltp') + pg_prewarm('oltp_pkey');" | psql_ >/dev/null
before=$(echo "$cached" | psql_)
size=$(echo "SELECT pg_size_pretty(pg_relation_size('big'));" | psql_)
start=$(date +%s.%N)
echo "SELECT count(*) FROM big;" | psql_ >/dev/null
secs=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
after=$(echo "$cached" | psql_)
echo "cbt of $size scanned in $secs s with shared_buffers 128MB"
echo "oltp pages cached before the scan: $before, after: $after ($(python3 -c "print(round($after / $before, 3))")x kept)"
